#pragma once
// Opens a data set folder, whatever its kind:
//  - IDX: train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz] and the t10k-... (or
//    test-...) pair;
//  - CIFAR-10 or CIFAR-100 binary files (cifar_folder.hpp; CIFAR-100 with its fine labels);
//  - an image folder with train/ and test/ sub-folders, each holding one folder per class;
//  - a single folder of class folders: a seeded, stratified 1/6 of it is held out as test.
// Anything else is a DataError saying what was looked for.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "data/dataset.hpp"
#include "data/image_folder_dataset.hpp"

namespace cnn::data {

struct DatasetSplits {
  std::unique_ptr<Dataset> train, test;
  std::string kind;  // "idx", "cifar-10", "cifar-100" or "image-folder"
  std::vector<std::filesystem::path> files;  // every file the data set reads (nothing may write over one)
};

// target and images apply to image folders (see open_image_folder); the test side always takes
// the train side's shape, the same options, and must have the same classes.
DatasetSplits open_dataset(const std::filesystem::path& folder, SampleShape target = {}, std::uint64_t seed = 1,
                           const ImageFolderOptions& images = {});

}  // namespace cnn::data
