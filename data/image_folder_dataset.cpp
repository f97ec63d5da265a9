#include "data/image_folder_dataset.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "data/data_error.hpp"
#include "data/detail/cached_files.hpp"
#include "data/detail/folder_scan.hpp"
#include "data/detail/image_codec.hpp"
#include "data/detail/image_files.hpp"

namespace cnn::data {
namespace fs = std::filesystem;

namespace {

class ImageFolderDataset final : public Dataset {
 public:
  // pixels: every image decoded, CHW, one after the other; empty to decode each in load().
  // sizes: each image's, as its file stores it, where it is decoded on load (for the cache).
  ImageFolderDataset(fs::path folder, ClassFolders classes, SampleShape shape, std::vector<std::uint8_t> pixels,
                     const ImageFolderOptions& options, std::size_t skipped, std::vector<ImageInfo> sizes)
      : folder_(std::move(folder)),
        classes_(std::move(classes)),
        shape_(shape),
        pixels_(std::move(pixels)),
        max_decoded_image_bytes_(options.max_decoded_image_bytes),
        resize_shorter_side_(options.resize_shorter_side),
        skipped_(skipped) {
    if (lazy() && options.cache.enabled)
      cache_ = std::make_unique<CachedFiles>(options.cache, classes_.files, std::move(sizes), shape_,
                                             resize_shorter_side_, max_decoded_image_bytes_, full_path(folder_));
  }

  std::size_t size() const override { return classes_.files.size(); }
  SampleShape shape() const override { return shape_; }
  int num_classes() const override { return static_cast<int>(classes_.class_names.size()); }
  std::vector<std::string> class_names() const override { return classes_.class_names; }
  int resize_shorter_side() const override { return resize_shorter_side_; }

  std::string description() const override {
    std::string text = "image folder " + full_path(folder_) + ": " + std::to_string(size()) + " images " +
                       to_string(shape_) + ", " + std::to_string(num_classes()) + " classes";
    text += framing_text(resize_shorter_side_);
    if (lazy()) text += cache_ ? ", " + cache_->describe() : ", decoded on load from its files";
    if (skipped_ > 0)
      text += ", " + std::to_string(skipped_) + (skipped_ == 1 ? " unreadable image" : " unreadable images") + " skipped";
    return text;
  }

  int label(std::size_t index) const override {
    check_index(index);
    return classes_.labels[index];
  }

  int load(std::size_t index, float* out) const override {
    check_index(index);
    const std::size_t n = shape_.elements();
    if (!lazy())
      to_float(pixels_.data() + index * n, n, out);
    else if (!cache_ || !cache_->load(index, classes_.files[index], out))
      decode_image(classes_.files[index], shape_, out, max_decoded_image_bytes_, resize_shorter_side_);
    return classes_.labels[index];
  }

  int load_window(std::size_t index, const WindowChooser& choose, bool mirror, float* out,
                  float* scratch) const override {
    if (!lazy()) return Dataset::load_window(index, choose, mirror, out, scratch);
    check_index(index);
    if (!cache_ || !cache_->load_window(index, classes_.files[index], choose, mirror, out))
      decode_window(classes_.files[index], shape_, choose, mirror, out, max_decoded_image_bytes_);
    return classes_.labels[index];
  }

  std::size_t host_bytes() const override {
    std::size_t bytes = pixels_.size() + classes_.labels.size() * sizeof(int);
    for (const fs::path& file : classes_.files) bytes += sizeof(fs::path) + file.native().size();
    return bytes;
  }

 private:
  bool lazy() const { return pixels_.empty(); }

  void check_index(std::size_t index) const {
    if (index >= size()) {
      fail(folder_, "index " + std::to_string(index) + " out of range: the folder holds " +
                        std::to_string(size()) + " images");
    }
  }

  fs::path folder_;
  ClassFolders classes_;
  SampleShape shape_;
  std::vector<std::uint8_t> pixels_;  // CHW per image, all images; empty when decoding lazily
  std::size_t max_decoded_image_bytes_;
  int resize_shorter_side_;
  std::size_t skipped_;
  std::unique_ptr<CachedFiles> cache_;  // decoded on load, with a cache
};

// Takes the images that failed out of the data set, and their pixels out of `pixels` when it
// holds them, reporting each to on_skipped in file order. Returns how many were left out.
std::size_t leave_out_failed(const fs::path& folder, ClassFolders& classes, std::vector<std::uint8_t>& pixels,
                             std::size_t per_image, const std::vector<std::string>& errors,
                             const ImageFolderOptions& options) {
  std::vector<std::size_t> kept_in_class(classes.class_names.size()), skipped_in_class(classes.class_names.size());
  std::size_t kept = 0;
  for (std::size_t i = 0; i < errors.size(); ++i) {
    const auto label = static_cast<std::size_t>(classes.labels[i]);
    if (!errors[i].empty()) {
      ++skipped_in_class[label];
      if (options.on_skipped) options.on_skipped("skipped " + errors[i]);
      continue;
    }
    ++kept_in_class[label];
    if (kept != i) {
      classes.files[kept] = std::move(classes.files[i]);
      classes.labels[kept] = classes.labels[i];
      if (!pixels.empty())
        std::copy_n(pixels.begin() + static_cast<std::ptrdiff_t>(i * per_image), per_image,
                    pixels.begin() + static_cast<std::ptrdiff_t>(kept * per_image));
    }
    ++kept;
  }
  classes.files.resize(kept);
  classes.labels.resize(kept);
  if (!pixels.empty()) pixels.resize(kept * per_image);
  for (std::size_t c = 0; c < kept_in_class.size(); ++c) {
    if (kept_in_class[c] == 0)
      fail(folder / classes.class_names[c], "no readable image left in this class folder (" +
                                                std::to_string(skipped_in_class[c]) + " skipped)");
  }
  return errors.size() - kept;
}

}  // namespace

std::unique_ptr<Dataset> open_image_folder(const fs::path& folder, SampleShape target,
                                           const ImageFolderOptions& options) {
  ClassFolders classes = scan_class_folders(folder);
  const SampleShape shape = resolve_target(folder, target, classes.files, options);
  const std::size_t n = classes.files.size(), per_image = shape.elements();
  const bool eager = decode_at_open(n, per_image, options.eager_decode_limit);
  std::vector<std::uint8_t> pixels(eager ? n * per_image : 0);
  std::vector<ImageInfo> sizes(eager ? 0 : n);
  const std::vector<std::string> errors = check_each(n, options.skip_corrupt, [&](std::size_t i) {
    if (eager)
      decode_image(classes.files[i], shape, pixels.data() + i * per_image, options.max_decoded_image_bytes,
                   options.resize_shorter_side);
    else sizes[i] = verify_image(classes.files[i], options.max_decoded_image_bytes);
  });
  keep_passed(sizes, errors);
  const std::size_t skipped = leave_out_failed(folder, classes, pixels, per_image, errors, options);
  return std::make_unique<ImageFolderDataset>(folder, std::move(classes), shape, std::move(pixels), options, skipped,
                                              std::move(sizes));
}

std::unique_ptr<Dataset> open_image_folder(const fs::path& folder, SampleShape target, std::size_t eager_decode_limit) {
  ImageFolderOptions options;
  options.eager_decode_limit = eager_decode_limit;
  return open_image_folder(folder, target, options);
}

}  // namespace cnn::data
