#pragma once
// A folder of class folders holding PNG, JPEG or BMP images (data/detail/image_codec.hpp). Grey or
// RGB images are converted to target.channels (1 or 3; 0: grey or colour as the first image is) and
// resized (bilinear) to target height x width; target.height == 0 means the first image's size,
// width == 0 alone a square. Decoded on load, they may be kept decoded (ImageFolderOptions::cache).
#include <cstddef>
#include <filesystem>
#include <memory>

#include <cnnengine/data/dataset.hpp>

namespace cnn::data {

std::unique_ptr<Dataset> open_image_folder(const std::filesystem::path& folder, SampleShape target,
                                           const ImageFolderOptions& options = {});

std::unique_ptr<Dataset> open_image_folder(const std::filesystem::path& folder, SampleShape target,
                                           std::size_t eager_decode_limit);

}  // namespace cnn::data
