#pragma once
// A folder of class folders holding PNG, JPEG or BMP images (decoded by stb_image). Grey or RGB
// images are converted to target.channels (1 or 3; 0: grey or colour as the first image is) and
// resized (bilinear) to target height x
// width; target.height == 0 means the first image's size, width == 0 alone a square.
#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "data/dataset.hpp"

namespace cnn::data {

// Images are refused before decoding when width x height x channels, in bytes as stb_image
// decodes them (a 16-bit PNG value takes 2), is over this. 256 MiB holds an 8192x8192 RGBA image
// or an 89-megapixel RGB photo, far more than a CNN trains on, while one decode takes up to
// about 4 times it (a progressive JPEG's coefficients) on each decoding thread.
inline constexpr std::size_t kDefaultMaxDecodedImageBytes = std::size_t{256} << 20;

// Data sets up to this many decoded bytes are decoded at open and held in memory; larger ones
// check each image at open (as verify_image does) and decode it in load().
inline constexpr std::size_t kEagerDecodeLimit = std::size_t{1} << 30;

struct ImageFolderOptions {
  std::size_t eager_decode_limit = kEagerDecodeLimit;  // see kEagerDecodeLimit
  // An image is refused before it is decoded when its decoded size is over this (see
  // kDefaultMaxDecodedImageBytes).
  std::size_t max_decoded_image_bytes = kDefaultMaxDecodedImageBytes;
  // Leave out images that cannot be read (corrupt, truncated, not an image, over the size limit)
  // instead of failing; the data set's description counts them. A class folder left with no
  // image is still an error.
  bool skip_corrupt = false;
  // Called once for each image left out, in file order, on the thread that opens the folder,
  // with a line naming the file and why ("skipped <path>: <what was wrong>").
  std::function<void(const std::string& warning)> on_skipped;
};

std::unique_ptr<Dataset> open_image_folder(const std::filesystem::path& folder, SampleShape target,
                                           const ImageFolderOptions& options = {});

std::unique_ptr<Dataset> open_image_folder(const std::filesystem::path& folder, SampleShape target,
                                           std::size_t eager_decode_limit);

}  // namespace cnn::data
