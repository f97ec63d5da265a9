#pragma once
// A folder of CIFAR binary files, both splits:
//  - CIFAR-10 (cifar-10-batches-bin/): data_batch_1.bin .. data_batch_5.bin for training,
//    test_batch.bin, class names in batches.meta.txt;
//  - CIFAR-100 (cifar-100-binary/): train.bin, test.bin, class names in fine_label_names.txt
//    and coarse_label_names.txt.
// The folder may also be the one a tarball was unpacked into, holding one of those sub-folders.
// Class names are the numbers where the names file is missing. open_dataset opens these too
// (fine labels).
#include <filesystem>

#include "data/cifar_dataset.hpp"
#include <cnnengine/data/dataset.hpp>

namespace cnn::data {

// kind "cifar-10" or "cifar-100"; files: the data files and the names file read. A missing file
// (every one of data_batch_1..5.bin must be there), a data_batch_*.bin beyond those, or a folder
// that is no CIFAR data set is a DataError saying which.
DatasetSplits open_cifar_folder(const std::filesystem::path& folder, CifarLabels labels = CifarLabels::fine);

}  // namespace cnn::data
