#pragma once
// IDX image/label file pairs (MNIST, Fashion-MNIST), gzip or raw, held in memory as bytes.
#include <filesystem>
#include <memory>

#include <cnnengine/data/dataset.hpp>

namespace cnn::data {

// The class count is the largest label + 1 and must be at least 2.
std::unique_ptr<Dataset> open_idx(const std::filesystem::path& images, const std::filesystem::path& labels);

// The same with a class count fixed by the caller (a test set checked against its training
// set): every label must be below num_classes.
std::unique_ptr<Dataset> open_idx(const std::filesystem::path& images, const std::filesystem::path& labels,
                                  int num_classes);

}  // namespace cnn::data
