#include "data/detail/image_files.hpp"

#include <cstdint>
#include <optional>

namespace cnn::data {
namespace fs = std::filesystem;

namespace {

// The header of the first image that can be read. Without skip_corrupt that is the first image,
// whatever it holds.
ImageInfo first_image(const std::vector<fs::path>& files, const ImageFolderOptions& options) {
  if (options.skip_corrupt) {
    for (const fs::path& file : files) {
      try {
        return verify_image(file, options.max_decoded_image_bytes);
      } catch (const DataError&) {
        // left out later, with a warning
      }
    }
  }
  return probe_image(files.front(), options.max_decoded_image_bytes);
}

}  // namespace

SampleShape resolve_target(const fs::path& folder, SampleShape target, const std::vector<fs::path>& files,
                           const ImageFolderOptions& options) {
  std::optional<ImageInfo> first;
  auto first_info = [&] {
    if (!first) first = first_image(files, options);
    return *first;
  };
  if (target.channels == 0)  // the first image decides: grey (with or without alpha) or colour
    target.channels = first_info().channels <= 2 ? 1 : 3;
  if (target.channels != 1 && target.channels != 3)
    fail(folder, "cannot convert images to " + std::to_string(target.channels) + " channels: expected 1 or 3");
  if (target.height < 0 || target.width < 0)
    fail(folder, "invalid target size " + to_string(target) + ": expected positive height and width");
  if (target.height == 0 && options.resize_shorter_side > 0) {
    target.height = target.width = options.resize_shorter_side;  // the centre square
  } else if (target.height == 0) {
    target.height = first_info().height;
    target.width = first_info().width;
  } else if (target.width == 0) {
    target.width = target.height;
  }
  check_framing(target, options.resize_shorter_side);
  return target;
}

std::string framing_text(int resize_shorter_side) {
  if (resize_shorter_side == 0) return "";
  return " (each resized to " + std::to_string(resize_shorter_side) + " on its shorter side, its centre cropped)";
}

bool decode_at_open(std::size_t n, std::size_t per_sample, std::size_t limit) {
  std::size_t bytes = 0;
  return !__builtin_mul_overflow(n, per_sample, &bytes) && bytes <= limit;
}

std::size_t report_skipped(const std::vector<std::string>& errors, const ImageFolderOptions& options) {
  std::size_t skipped = 0;
  for (const std::string& error : errors) {
    if (error.empty()) continue;
    ++skipped;
    if (options.on_skipped) options.on_skipped("skipped " + error);
  }
  return skipped;
}

ImageSamples::ImageSamples(std::vector<fs::path> files, SampleShape shape, bool held,
                           std::size_t max_decoded_image_bytes, int resize_shorter_side)
    : files_(std::move(files)),
      shape_(shape),
      held_(held),
      max_decoded_image_bytes_(max_decoded_image_bytes),
      resize_shorter_side_(resize_shorter_side) {
  if (held_) pixels_.resize(files_.size() * shape_.elements());
  else sizes_.resize(files_.size());
}

ImageInfo ImageSamples::open(std::size_t index) {
  if (!held_) return sizes_[index] = verify_image(files_[index], max_decoded_image_bytes_);
  return decode_image(files_[index], shape_, pixels_.data() + index * shape_.elements(), max_decoded_image_bytes_,
                      resize_shorter_side_);
}

void ImageSamples::keep_passed(const std::vector<std::string>& errors) {
  data::keep_passed(files_, errors);
  data::keep_passed(pixels_, errors, shape_.elements());
  data::keep_passed(sizes_, errors);
}

void ImageSamples::keep_decoded(const DecodedCacheOptions& options, const std::string& name) {
  if (held_ || !options.enabled) return;
  cache_ = std::make_unique<CachedFiles>(options, files_, sizes_, shape_, resize_shorter_side_,
                                         max_decoded_image_bytes_, name);
}

std::string ImageSamples::loading_text() const {
  if (held_) return "";
  return cache_ ? ", " + cache_->describe() : ", decoded on load from its files";
}

void ImageSamples::load(std::size_t index, float* out) const {
  const std::size_t n = shape_.elements();
  if (held_) {
    to_float(pixels_.data() + index * n, n, out);
    return;
  }
  if (cache_ && cache_->load(index, files_[index], out)) return;
  decode_image(files_[index], shape_, out, max_decoded_image_bytes_, resize_shorter_side_);
}

bool ImageSamples::load_window(std::size_t index, const WindowChooser& choose, bool mirror, float* out) const {
  if (held_) return false;
  if (!cache_ || !cache_->load_window(index, files_[index], choose, mirror, out))
    decode_window(files_[index], shape_, choose, mirror, out, max_decoded_image_bytes_);
  return true;
}

std::size_t ImageSamples::host_bytes() const {
  std::size_t bytes = pixels_.size();
  for (const fs::path& file : files_) bytes += sizeof(fs::path) + file.native().size();
  return bytes;
}

}  // namespace cnn::data
