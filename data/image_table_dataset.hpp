#pragma once
// One side (train/, test/ or val/) of a multi-label or regression data set: images/ holding PNG,
// JPEG or BMP images (in sub-folders or not), and labels.csv beside it giving each image's
// labels or targets (detail/labels_csv.hpp). Images are converted and resized as an image
// folder's are (image_folder_dataset.hpp); the targets are the table's floats, as they are.
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <cnnengine/data/dataset.hpp>

namespace cnn::data {

// `task`: multilabel (every value must be 0 or 1) or regress; none to tell by the values:
// multilabel where every one is 0 or 1, else regress (any other task is a ConfigError).
// `expected_names`: the header's names after "file" must be these (the train side's), where
// given. A DataError names the file, and the line and column: a row naming no image under
// images/, an image without a row, and every fault labels.csv can have. With
// options.skip_corrupt an image that cannot be read is left out with its row.
std::unique_ptr<Dataset> open_image_table(const std::filesystem::path& side, SampleShape target,
                                          std::optional<Task> task, const std::vector<std::string>& expected_names = {},
                                          const ImageFolderOptions& options = {});

}  // namespace cnn::data
