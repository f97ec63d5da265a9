#include "data/cifar_dataset.hpp"

#include <cstdint>
#include <new>
#include <string>

#include "data/data_error.hpp"
#include "data/detail/cifar_file.hpp"
#include "data/detail/class_names_file.hpp"

namespace cnn::data {
namespace {

namespace fs = std::filesystem;

class CifarDataset final : public Dataset {
 public:
  CifarDataset(std::string source, std::vector<std::uint8_t> pixels, std::vector<std::uint8_t> labels,
               std::vector<std::string> class_names)
      : source_(std::move(source)),
        pixels_(std::move(pixels)),
        labels_(std::move(labels)),
        class_names_(std::move(class_names)) {}

  std::size_t size() const override { return labels_.size(); }
  SampleShape shape() const override { return kShape; }
  int num_classes() const override { return static_cast<int>(class_names_.size()); }
  std::vector<std::string> class_names() const override { return class_names_; }

  std::string description() const override {
    return source_ + ": " + std::to_string(size()) + " images " + to_string(kShape) + ", " +
           std::to_string(num_classes()) + " classes";
  }

  int label(std::size_t index) const override {
    check_index(index);
    return labels_[index];
  }

  int load(std::size_t index, float* out) const override {
    check_index(index);
    const std::uint8_t* src = pixels_.data() + index * kCifarPixelBytes;
    for (std::size_t i = 0; i < kCifarPixelBytes; ++i) out[i] = static_cast<float>(src[i]) * (1.0f / 255.0f);
    return labels_[index];
  }

  std::size_t host_bytes() const override { return pixels_.size() + labels_.size(); }

 private:
  static constexpr SampleShape kShape{3, kCifarSide, kCifarSide};

  void check_index(std::size_t index) const {
    if (index >= labels_.size())
      throw DataError(source_ + ": index " + std::to_string(index) + " out of range: the data set holds " +
                      std::to_string(labels_.size()) + " images");
  }

  std::string source_;  // "CIFAR-10 /data/cifar-10-batches-bin/data_batch_1.bin .. data_batch_5.bin"
  std::vector<std::uint8_t> pixels_;
  std::vector<std::uint8_t> labels_;
  std::vector<std::string> class_names_;
};

// "CIFAR-10 /full/path/data_batch_1.bin .. data_batch_5.bin"
std::string source_text(const std::string& title, const std::vector<fs::path>& files) {
  std::string text = title + " " + full_path(files.front());
  if (files.size() > 1) text += " .. " + files.back().filename().string();
  return text;
}

// Every file's size is checked before anything is allocated, and the room for all their records
// is taken once, exactly.
std::unique_ptr<Dataset> open_cifar(const std::string& title, const std::vector<fs::path>& files,
                                    const CifarRecordLayout& layout, const fs::path& class_names) {
  if (files.empty()) throw ConfigError(title + ": no files given");
  std::vector<std::string> names =
      read_class_names(class_names, layout.label_classes[layout.class_label]);
  std::vector<std::size_t> counts;
  std::size_t total = 0;
  for (const fs::path& file : files) total += counts.emplace_back(cifar_record_count(file, layout));

  std::vector<std::uint8_t> labels, pixels;
  try {
    labels.reserve(total);
    pixels.reserve(total * kCifarPixelBytes);
  } catch (const std::bad_alloc&) {
    fail(files.front(), "out of memory: " + std::to_string(total) + " images of " + title + " take " +
                            std::to_string(total * (kCifarPixelBytes + 1)) + " bytes");
  }
  for (std::size_t f = 0; f < files.size(); ++f) read_cifar_records(files[f], layout, counts[f], labels, pixels);
  return std::make_unique<CifarDataset>(source_text(title, files), std::move(pixels), std::move(labels),
                                        std::move(names));
}

}  // namespace

std::unique_ptr<Dataset> open_cifar10(const std::vector<fs::path>& files, const fs::path& class_names) {
  return open_cifar("CIFAR-10", files, CifarRecordLayout{{10}, {"label"}, 0}, class_names);
}

std::unique_ptr<Dataset> open_cifar100(const std::vector<fs::path>& files, const fs::path& class_names,
                                       CifarLabels labels) {
  const CifarRecordLayout layout{{20, 100}, {"coarse label", "fine label"}, labels == CifarLabels::fine ? 1u : 0u};
  return open_cifar(labels == CifarLabels::fine ? "CIFAR-100" : "CIFAR-100 (coarse labels)", files, layout,
                    class_names);
}

}  // namespace cnn::data
