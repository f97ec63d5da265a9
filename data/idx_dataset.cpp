#include "data/idx_dataset.hpp"

#include <algorithm>
#include <cstdint>

#include "data/data_error.hpp"
#include "data/detail/idx_file.hpp"

namespace cnn::data {
namespace {

class IdxDataset final : public Dataset {
 public:
  IdxDataset(std::filesystem::path images_path, IdxArray images, std::vector<std::uint8_t> labels,
             int num_classes)
      : images_path_(std::move(images_path)),
        pixels_(std::move(images.data)),
        labels_(std::move(labels)),
        shape_{1, static_cast<int>(images.dims[1]), static_cast<int>(images.dims[2])},
        num_classes_(num_classes) {}

  std::size_t size() const override { return labels_.size(); }
  SampleShape shape() const override { return shape_; }
  int num_classes() const override { return num_classes_; }

  std::vector<std::string> class_names() const override {
    std::vector<std::string> names;
    for (int c = 0; c < num_classes_; ++c) names.push_back(std::to_string(c));
    return names;
  }

  std::string description() const override {
    return "IDX " + full_path(images_path_) + ": " + std::to_string(size()) + " images " +
           to_string(shape_) + ", " + std::to_string(num_classes_) + " classes";
  }

  int label(std::size_t index) const override {
    check_index(index);
    return labels_[index];
  }

  int load(std::size_t index, float* out) const override {
    check_index(index);
    const std::size_t n = shape_.elements();
    const std::uint8_t* src = pixels_.data() + index * n;
    for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(src[i]) * (1.0f / 255.0f);
    return labels_[index];
  }

  std::size_t host_bytes() const override { return pixels_.size() + labels_.size(); }

 private:
  void check_index(std::size_t index) const {
    if (index >= labels_.size()) {
      fail(images_path_, "index " + std::to_string(index) + " out of range: the file holds " +
                             std::to_string(labels_.size()) + " images");
    }
  }

  std::filesystem::path images_path_;
  std::vector<std::uint8_t> pixels_;
  std::vector<std::uint8_t> labels_;
  SampleShape shape_;
  int num_classes_;
};

// The class count comes from the largest label: a single corrupt label (200 among 0..9) would
// silently build a network of 201 classes. Every class below it must have a sample.
void check_every_class_present(const std::filesystem::path& labels_path, const std::vector<std::uint8_t>& values,
                               int num_classes) {
  std::vector<std::size_t> count(static_cast<std::size_t>(num_classes), 0);
  for (std::uint8_t v : values) ++count[v];
  std::vector<int> missing;
  for (int c = 0; c < num_classes; ++c)
    if (count[static_cast<std::size_t>(c)] == 0) missing.push_back(c);
  if (missing.empty()) return;
  constexpr std::size_t kListed = 10;
  std::string list;
  for (std::size_t i = 0; i < missing.size() && i < kListed; ++i)
    list += (i ? ", " : "") + std::to_string(missing[i]);
  if (missing.size() > kListed) list += " and " + std::to_string(missing.size() - kListed) + " more";
  const auto largest = std::max_element(values.begin(), values.end()) - values.begin();
  fail(labels_path, "the largest label, " + std::to_string(num_classes - 1) + " at record " + std::to_string(largest) +
                        ", makes " + std::to_string(num_classes) + " classes, but class" +
                        (missing.size() > 1 ? "es " : " ") + list + " ha" + (missing.size() > 1 ? "ve" : "s") +
                        " no training sample (a corrupt label?)");
}

// num_classes <= 0: take the largest label + 1.
std::unique_ptr<Dataset> open(const std::filesystem::path& images_path,
                              const std::filesystem::path& labels_path, int num_classes) {
  IdxArray images = read_idx(images_path, 3, "pixels");
  IdxArray labels = read_idx(labels_path, 1, "labels");
  if (labels.dims[0] != images.dims[0]) {
    fail(labels_path, "label count mismatch: expected " + std::to_string(images.dims[0]) +
                          " labels (one per image in " + full_path(images_path) + "), found " +
                          std::to_string(labels.dims[0]));
  }
  const auto& values = labels.data;
  if (num_classes <= 0) {
    num_classes = *std::max_element(values.begin(), values.end()) + 1;
    if (num_classes < 2) {
      fail(labels_path, "every label is " + std::to_string(num_classes - 1) +
                            ": expected at least 2 classes");
    }
    check_every_class_present(labels_path, values, num_classes);
  }
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (values[i] >= num_classes) {
      fail(labels_path, "label out of range at record " + std::to_string(i) + ": expected < " +
                            std::to_string(num_classes) + ", found " + std::to_string(values[i]));
    }
  }
  return std::make_unique<IdxDataset>(images_path, std::move(images), std::move(labels.data), num_classes);
}

}  // namespace

std::unique_ptr<Dataset> open_idx(const std::filesystem::path& images, const std::filesystem::path& labels) {
  return open(images, labels, 0);
}

std::unique_ptr<Dataset> open_idx(const std::filesystem::path& images, const std::filesystem::path& labels,
                                  int num_classes) {
  if (num_classes < 2) fail(labels, "expected at least 2 classes, asked for " + std::to_string(num_classes));
  return open(images, labels, num_classes);
}

}  // namespace cnn::data
