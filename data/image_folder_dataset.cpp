#include "cnnengine/data/image_folder_dataset.hpp"

#include <cstdint>
#include <string>
#include <vector>

#include "cnnengine/data/data_error.hpp"
#include "cnnengine/data/detail/folder_scan.hpp"
#include "cnnengine/data/detail/image_codec.hpp"
#include "cnnengine/data/detail/parallel_for.hpp"

namespace cnn::data {
namespace fs = std::filesystem;

namespace {

void to_float(const std::uint8_t* src, std::size_t n, float* out) {
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(src[i]) * (1.0f / 255.0f);
}

class ImageFolderDataset final : public Dataset {
 public:
  ImageFolderDataset(fs::path folder, ClassFolders classes, SampleShape shape, bool eager)
      : folder_(std::move(folder)), classes_(std::move(classes)), shape_(shape) {
    const std::size_t n = classes_.files.size();
    if (eager) {
      pixels_.resize(n * shape_.elements());
      parallel_for(n, [&](std::size_t i) {
        decode_image(classes_.files[i], shape_, pixels_.data() + i * shape_.elements());
      });
    } else {
      parallel_for(n, [&](std::size_t i) { probe_image(classes_.files[i]); });
    }
  }

  std::size_t size() const override { return classes_.files.size(); }
  SampleShape shape() const override { return shape_; }
  int num_classes() const override { return static_cast<int>(classes_.class_names.size()); }
  std::vector<std::string> class_names() const override { return classes_.class_names; }

  std::string description() const override {
    std::string text = "image folder " + full_path(folder_) + ": " + std::to_string(size()) + " images " +
                       to_string(shape_) + ", " + std::to_string(num_classes()) + " classes";
    if (lazy()) text += ", decoded on load (too large to hold decoded)";
    return text;
  }

  int label(std::size_t index) const override {
    check_index(index);
    return classes_.labels[index];
  }

  int load(std::size_t index, float* out) const override {
    check_index(index);
    const std::size_t n = shape_.elements();
    if (lazy()) {
      std::vector<std::uint8_t> decoded(n);
      decode_image(classes_.files[index], shape_, decoded.data());
      to_float(decoded.data(), n, out);
    } else {
      to_float(pixels_.data() + index * n, n, out);
    }
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
};

SampleShape resolve_target(const fs::path& folder, SampleShape target, const ClassFolders& classes) {
  if (target.channels == 0) {  // the first image decides: grey (with or without alpha) or colour
    const ImageInfo first = probe_image(classes.files.front());
    target.channels = first.channels <= 2 ? 1 : 3;
  }
  if (target.channels != 1 && target.channels != 3)
    fail(folder, "cannot convert images to " + std::to_string(target.channels) + " channels: expected 1 or 3");
  if (target.height < 0 || target.width < 0)
    fail(folder, "invalid target size " + to_string(target) + ": expected positive height and width");
  if (target.height == 0) {
    ImageInfo first = probe_image(classes.files.front());
    target.height = first.height;
    target.width = first.width;
  } else if (target.width == 0) {
    target.width = target.height;
  }
  return target;
}

}  // namespace

std::unique_ptr<Dataset> open_image_folder(const fs::path& folder, SampleShape target,
                                           std::size_t eager_decode_limit) {
  ClassFolders classes = scan_class_folders(folder);
  SampleShape shape = resolve_target(folder, target, classes);
  std::size_t decoded_bytes = 0;
  const bool eager = !__builtin_mul_overflow(classes.files.size(), shape.elements(), &decoded_bytes) &&
                     decoded_bytes <= eager_decode_limit;
  return std::make_unique<ImageFolderDataset>(folder, std::move(classes), shape, eager);
}

std::unique_ptr<Dataset> open_image_folder(const fs::path& folder, SampleShape target) {
  return open_image_folder(folder, target, kEagerDecodeLimit);
}

}  // namespace cnn::data
