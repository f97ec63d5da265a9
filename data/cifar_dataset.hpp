#pragma once
// CIFAR-10 and CIFAR-100 in their binary version: files of records, each the label byte(s) then
// a 3x32x32 image (red, green, blue planes), held in memory as bytes. A folder of them is opened
// by open_dataset or open_cifar_folder (cifar_folder.hpp).
#include <filesystem>
#include <memory>
#include <vector>

#include <cnnengine/data/dataset.hpp>

namespace cnn::data {

// Which of a CIFAR-100 record's labels is its class: fine (100 classes) or coarse (20).
enum class CifarLabels { fine, coarse };

// CIFAR-10: records of a label byte (0..9) and 3072 pixel bytes, the files read in order (the
// training set is data_batch_1.bin .. data_batch_5.bin, the test set test_batch.bin). Class
// names come from `class_names` (batches.meta.txt), or are the numbers 0..9 where it does not
// exist. Throws DataError naming the file.
std::unique_ptr<Dataset> open_cifar10(const std::vector<std::filesystem::path>& files,
                                      const std::filesystem::path& class_names);

// CIFAR-100: records of a coarse label byte (0..19), a fine label byte (0..99) and 3072 pixel
// bytes (train.bin, test.bin). Both labels are checked; `labels` picks the class, and
// `class_names` should match it (fine_label_names.txt or coarse_label_names.txt).
std::unique_ptr<Dataset> open_cifar100(const std::vector<std::filesystem::path>& files,
                                       const std::filesystem::path& class_names,
                                       CifarLabels labels = CifarLabels::fine);

}  // namespace cnn::data
