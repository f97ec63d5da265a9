#include "data/detail/cached_files.hpp"

#include <algorithm>
#include <utility>

#include "data/detail/decoded_cache.hpp"
#include "data/detail/image_window.hpp"
#include "data/detail/resize.hpp"

namespace cnn::data {

CachedFiles::CachedFiles(const DecodedCacheOptions& options, const std::vector<std::filesystem::path>& files,
                         std::vector<ImageInfo> sizes, SampleShape shape, int resize_shorter_side,
                         std::size_t max_decoded_image_bytes, const std::string& name)
    : sizes_(std::move(sizes)),
      shape_(shape),
      resize_shorter_side_(resize_shorter_side),
      max_decoded_image_bytes_(max_decoded_image_bytes) {
  const int side = options.shorter_side > 0 ? options.shorter_side
                   : resize_shorter_side > 0 ? resize_shorter_side
                                             : std::max(shape.height, shape.width);
  std::vector<std::pair<int, int>> stored(sizes_.size());
  for (std::size_t i = 0; i < sizes_.size(); ++i) stored[i] = {sizes_[i].height, sizes_[i].width};
  cache_ = std::make_unique<DecodedCache>(options, shape.channels, side, stored, files_identity(files), name);
}

CachedFiles::~CachedFiles() = default;

const std::uint8_t* CachedFiles::kept(std::size_t index, const std::filesystem::path& file) const {
  if (const std::uint8_t* pixels = cache_->find(index)) return pixels;
  std::uint8_t* room = cache_->claim(index);
  if (!room) return nullptr;
  try {
    decode_kept(file, shape_.channels, cache_->height(index), cache_->width(index), sizes_[index], room,
                max_decoded_image_bytes_);
  } catch (...) {
    cache_->abandon(index);
    throw;
  }
  cache_->publish(index);
  return room;
}

bool CachedFiles::load(std::size_t index, const std::filesystem::path& file, float* out) const {
  const std::uint8_t* pixels = kept(index, file);
  if (!pixels) return false;
  // The framing's window of the image as the cache keeps it.
  const int h = cache_->height(index), w = cache_->width(index);
  const Framing f = frame_image(h, w, shape_.height, shape_.width, resize_shorter_side_);
  const double sy = static_cast<double>(h) / static_cast<double>(f.scaled_height);
  const double sx = static_cast<double>(w) / static_cast<double>(f.scaled_width);
  const SourceWindow window{static_cast<double>(f.top) * sy, static_cast<double>(f.left) * sx, shape_.height * sy,
                            shape_.width * sx};
  resize_window_planar(pixels, h, w, shape_.channels, out, shape_.height, shape_.width, window, false);
  return true;
}

bool CachedFiles::load_window(std::size_t index, const std::filesystem::path& file, const WindowChooser& choose,
                              bool mirror, float* out) const {
  const std::uint8_t* pixels = kept(index, file);
  if (!pixels) return false;
  const int h = cache_->height(index), w = cache_->width(index);
  const ImageWindow picked = checked_window(choose, h, w);
  const SourceWindow window{double(picked.top), double(picked.left), double(picked.height), double(picked.width)};
  resize_window_planar(pixels, h, w, shape_.channels, out, shape_.height, shape_.width, window, mirror);
  return true;
}

std::string CachedFiles::describe() const { return cache_->describe(); }

}  // namespace cnn::data
