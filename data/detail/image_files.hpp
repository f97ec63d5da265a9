#pragma once
// What the data sets of image files share (class folders, segmentation folders, images with a
// labels table): the sample shape their first image decides, checking every file on a few
// threads, leaving out the files that failed, and the images themselves, decoded at open while
// they fit in memory (ImageFolderOptions::eager_decode_limit), else on each load.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/data_error.hpp"
#include <cnnengine/data/dataset.hpp>
#include "data/detail/cached_files.hpp"
#include "data/detail/image_codec.hpp"
#include "data/detail/parallel_for.hpp"

namespace cnn::data {


// `target` made whole (dataset.hpp, open_dataset): channels 0 takes the first image's (grey or
// colour), height 0 its size (with options.resize_shorter_side S: S x S), width 0 alone a square;
// a ConfigError where the framing does not fit it (check_framing). The first image is the first of `files`
// that can be read with skip_corrupt, the first whatever it holds without. A DataError naming
// `folder` for a channel count other than 1 or 3 or a negative size.
SampleShape resolve_target(const std::filesystem::path& folder, SampleShape target,
                           const std::vector<std::filesystem::path>& files, const ImageFolderOptions& options);

// What a data set's description says of ImageFolderOptions::resize_shorter_side: "" for 0.
std::string framing_text(int resize_shorter_side);

// Whether n samples of `per_sample` bytes are decoded at open: they fit under `limit`.
bool decode_at_open(std::size_t n, std::size_t per_sample, std::size_t limit);

// Runs check(i) for i in [0, n), on a few threads. Without skip_corrupt the first DataError (of
// the lowest index) is thrown; with it, each one's error is kept by index ("" when it passed).
template <typename Check>
std::vector<std::string> check_each(std::size_t n, bool skip_corrupt, Check check) {
  std::vector<std::string> errors(n);
  parallel_for(n, [&](std::size_t i) {
    try {
      check(i);
    } catch (const DataError& e) {
      if (!skip_corrupt) throw;
      errors[i] = e.what();
    }
  });
  return errors;
}

// Reports each error to options.on_skipped ("skipped <error>"), in index order; returns how many.
std::size_t report_skipped(const std::vector<std::string>& errors, const ImageFolderOptions& options);

// Keeps the items of the indices that passed (errors[i] empty), in order; each item is `per_item`
// consecutive elements of `items` (all of it when `items` is empty).
template <typename T>
void keep_passed(std::vector<T>& items, const std::vector<std::string>& errors, std::size_t per_item = 1) {
  if (items.empty()) return;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < errors.size(); ++i) {
    if (!errors[i].empty()) continue;
    if (kept != i)
      std::move(items.begin() + static_cast<std::ptrdiff_t>(i * per_item),
                items.begin() + static_cast<std::ptrdiff_t>((i + 1) * per_item),
                items.begin() + static_cast<std::ptrdiff_t>(kept * per_item));
    ++kept;
  }
  items.resize(kept * per_item);
}

// The images of a data set, one a sample, at one shape.
class ImageSamples {
 public:
  // held: each image decoded at open and held; else checked at open and decoded in each load().
  ImageSamples(std::vector<std::filesystem::path> files, SampleShape shape, bool held,
               std::size_t max_decoded_image_bytes, int resize_shorter_side);

  // At open, on any thread, once for each image: decodes and holds it, or checks it. Returns its
  // header (its size before resizing).
  ImageInfo open(std::size_t index);
  // Leaves out the images whose error is not "" (check_each).
  void keep_passed(const std::vector<std::string>& errors);
  // Images decoded on load keep their pixels in a cache (`name`: the data set's folder), once the
  // images that failed are left out. Nothing for held images or a cache not enabled.
  void keep_decoded(const DecodedCacheOptions& options, const std::string& name);

  std::size_t size() const { return files_.size(); }
  SampleShape shape() const { return shape_; }
  int resize_shorter_side() const { return resize_shorter_side_; }
  bool held() const { return held_; }
  const std::filesystem::path& file(std::size_t index) const { return files_[index]; }
  // Writes shape().elements() floats in [0, 1], CHW. Thread-safe. Throws DataError.
  void load(std::size_t index, float* out) const;
  // Dataset::load_window from the file, when the images are not held (returns false: the caller
  // takes the window of load()'s sample).
  bool load_window(std::size_t index, const WindowChooser& choose, bool mirror, float* out) const;
  std::size_t host_bytes() const;
  // ", decoded on load from its files", or the cache's description; "" where held.
  std::string loading_text() const;

 private:
  std::vector<std::filesystem::path> files_;
  SampleShape shape_;
  bool held_;
  std::size_t max_decoded_image_bytes_;
  int resize_shorter_side_;
  std::vector<std::uint8_t> pixels_;  // CHW a sample, every sample, when held
  std::vector<ImageInfo> sizes_;      // each image's, as its header gives it, when decoded on load
  std::unique_ptr<CachedFiles> cache_;
};

}  // namespace cnn::data
