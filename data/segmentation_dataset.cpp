#include "data/segmentation_dataset.hpp"

#include <algorithm>
#include <cstdint>

#include "data/data_error.hpp"
#include "data/detail/image_codec.hpp"
#include "data/detail/image_files.hpp"
#include "data/detail/mask_pairs.hpp"
#include "data/detail/resize.hpp"

namespace cnn::data {
namespace fs = std::filesystem;

namespace {

// The largest class in the mask (-1 when every pixel is ignored). A value at or above `classes`
// other than kIgnoreMask is a DataError naming the mask, the value and where it is.
int check_mask_values(const fs::path& path, const Mask& mask, int classes) {
  int largest = -1;
  for (std::size_t p = 0; p < mask.values.size(); ++p) {
    const int value = mask.values[p];
    if (value == kIgnoreMask) continue;
    if (value >= classes) {
      const auto width = static_cast<std::size_t>(mask.info.width);
      fail(path, "value " + std::to_string(value) + " at x=" + std::to_string(p % width) + ", y=" +
                     std::to_string(p / width) + " is not a class: expected 0.." + std::to_string(classes - 1) +
                     " (the " + std::to_string(classes) + " classes) or " + std::to_string(kIgnoreMask) +
                     " (ignored)");
    }
    largest = std::max(largest, value);
  }
  return largest;
}

class SegmentationDataset final : public Dataset {
 public:
  // masks: each mask at the images' size, when the images are held; empty otherwise.
  SegmentationDataset(fs::path side, ImageSamples images, std::vector<fs::path> mask_files,
                      std::vector<std::uint8_t> masks, std::vector<std::string> names,
                      std::size_t max_decoded_image_bytes, std::size_t skipped)
      : side_(std::move(side)),
        images_(std::move(images)),
        mask_files_(std::move(mask_files)),
        masks_(std::move(masks)),
        names_(std::move(names)),
        max_decoded_image_bytes_(max_decoded_image_bytes),
        skipped_(skipped) {}

  std::size_t size() const override { return images_.size(); }
  SampleShape shape() const override { return images_.shape(); }
  int resize_shorter_side() const override { return images_.resize_shorter_side(); }
  Task task() const override { return Task::segment; }
  int num_classes() const override { return static_cast<int>(names_.size()); }
  std::vector<std::string> class_names() const override { return names_; }

  std::string description() const override {
    std::string text = "segmentation folder " + full_path(side_) + ": " + std::to_string(size()) + " images " +
                       to_string(shape()) + " with masks, " + std::to_string(num_classes()) + " classes";
    text += framing_text(images_.resize_shorter_side());
    text += images_.loading_text();
    if (skipped_ > 0)
      text += ", " + std::to_string(skipped_) + (skipped_ == 1 ? " unreadable pair" : " unreadable pairs") + " skipped";
    return text;
  }

  int label(std::size_t index) const override {
    check_index(index);
    return 0;
  }

  int load(std::size_t index, float* out) const override {
    check_index(index);
    images_.load(index, out);
    return 0;
  }

  void load_target(std::size_t index, void* out) const override {
    check_index(index);
    const SampleShape s = shape();
    const std::size_t plane = static_cast<std::size_t>(s.height) * static_cast<std::size_t>(s.width);
    auto* mask = static_cast<std::uint8_t*>(out);
    if (images_.held()) {
      std::copy_n(masks_.data() + index * plane, plane, mask);
      return;
    }
    const Mask decoded = decode_mask(mask_files_[index], max_decoded_image_bytes_);
    check_mask_values(mask_files_[index], decoded, num_classes());  // the file may have changed since open
    const Framing framing =
        frame_image(decoded.info.height, decoded.info.width, s.height, s.width, images_.resize_shorter_side());
    resize_nearest(decoded.values.data(), decoded.info.height, decoded.info.width, mask, s.height, s.width, framing);
  }

  std::size_t host_bytes() const override {
    std::size_t bytes = images_.host_bytes() + masks_.size();
    for (const fs::path& file : mask_files_) bytes += sizeof(fs::path) + file.native().size();
    return bytes;
  }

 private:
  void check_index(std::size_t index) const {
    if (index >= size())
      fail(side_, "index " + std::to_string(index) + " out of range: the folder holds " + std::to_string(size()) +
                      " images");
  }

  fs::path side_;
  ImageSamples images_;
  std::vector<fs::path> mask_files_;
  std::vector<std::uint8_t> masks_;
  std::vector<std::string> names_;
  std::size_t max_decoded_image_bytes_;
  std::size_t skipped_;
};

std::vector<std::string> numbered(int count) {
  std::vector<std::string> names;
  for (int c = 0; c < count; ++c) names.push_back(std::to_string(c));
  return names;
}

}  // namespace

std::unique_ptr<Dataset> open_segmentation_folder(const fs::path& side, SampleShape target,
                                                  std::vector<std::string> class_names,
                                                  const ImageFolderOptions& options) {
  if (!class_names.empty() &&
      (class_names.size() < 2 || class_names.size() > static_cast<std::size_t>(kMaxSegmentationClasses)))
    throw ConfigError("a segmentation has 2 to " + std::to_string(kMaxSegmentationClasses) + " classes, not " +
                      std::to_string(class_names.size()));
  MaskPairs pairs = scan_mask_pairs(side);
  const SampleShape shape = resolve_target(side, target, pairs.images, options);
  const std::size_t n = pairs.images.size();
  const std::size_t plane = static_cast<std::size_t>(shape.height) * static_cast<std::size_t>(shape.width);
  const bool held = decode_at_open(n, shape.elements() + plane, options.eager_decode_limit);
  ImageSamples images(std::move(pairs.images), shape, held, options.max_decoded_image_bytes, options.resize_shorter_side);
  std::vector<std::uint8_t> masks(held ? n * plane : 0);
  std::vector<int> largest(n, -1);
  // Without names any value but 255 is a class, until the largest decides their count.
  const int classes = class_names.empty() ? kMaxSegmentationClasses : static_cast<int>(class_names.size());

  const std::vector<std::string> errors = check_each(n, options.skip_corrupt, [&](std::size_t i) {
    const ImageInfo image = images.open(i);
    const fs::path& file = pairs.masks[i];
    const Mask mask = decode_mask(file, options.max_decoded_image_bytes);
    if (mask.info.width != image.width || mask.info.height != image.height)
      fail(file, "the mask is " + std::to_string(mask.info.width) + "x" + std::to_string(mask.info.height) +
                     ", its image " + full_path(images.file(i)) + " " + std::to_string(image.width) + "x" +
                     std::to_string(image.height) + ": expected a mask of its image's size");
    largest[i] = check_mask_values(file, mask, classes);
    if (held)
      resize_nearest(mask.values.data(), mask.info.height, mask.info.width, masks.data() + i * plane, shape.height,
                     shape.width, frame_image(mask.info.height, mask.info.width, shape.height, shape.width,
                                              options.resize_shorter_side));
  });
  const std::size_t skipped = report_skipped(errors, options);
  images.keep_passed(errors);
  images.keep_decoded(options.cache, full_path(side));
  keep_passed(pairs.masks, errors);
  keep_passed(masks, errors, plane);
  keep_passed(largest, errors);
  if (images.size() == 0)
    fail(side, "no image and mask left that can be read (" + std::to_string(skipped) + " pairs skipped)");

  if (class_names.empty()) {
    const int top = *std::max_element(largest.begin(), largest.end());
    if (top < 0)
      fail(side / "masks", "no class in any mask: every pixel is " + std::to_string(kIgnoreMask) + " (ignored)");
    if (top == 0)
      fail(side / "masks", "every mask holds class 0 alone: a segmentation needs at least 2 classes (a "
                           "classes.txt beside train/ and test/ names them, one a line)");
    class_names = numbered(top + 1);
  }
  return std::make_unique<SegmentationDataset>(side, std::move(images), std::move(pairs.masks), std::move(masks),
                                               std::move(class_names), options.max_decoded_image_bytes, skipped);
}

}  // namespace cnn::data
