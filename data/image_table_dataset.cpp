#include "data/image_table_dataset.hpp"

#include <algorithm>
#include <cstdio>
#include <map>

#include "base/utf8.hpp"
#include "data/data_error.hpp"
#include "data/detail/folder_scan.hpp"
#include "data/detail/image_files.hpp"
#include "data/detail/labels_csv.hpp"

namespace cnn::data {
namespace fs = std::filesystem;

namespace {

class ImageTableDataset final : public Dataset {
 public:
  ImageTableDataset(fs::path side, Task task, ImageSamples images, std::vector<std::string> names,
                    std::vector<float> targets, std::size_t skipped)
      : side_(std::move(side)),
        task_(task),
        images_(std::move(images)),
        names_(std::move(names)),
        targets_(std::move(targets)),
        skipped_(skipped) {}

  std::size_t size() const override { return images_.size(); }
  SampleShape shape() const override { return images_.shape(); }
  int resize_shorter_side() const override { return images_.resize_shorter_side(); }
  Task task() const override { return task_; }
  int num_classes() const override { return static_cast<int>(names_.size()); }
  std::vector<std::string> class_names() const override { return names_; }

  std::string description() const override {
    const bool multilabel = task_ == Task::multilabel;
    std::string text = std::string(multilabel ? "multi-label" : "regression") + " images " + full_path(side_) + ": " +
                       std::to_string(size()) + " images " + to_string(shape()) + ", " +
                       std::to_string(num_classes()) + (multilabel ? " labels" : " targets") + " (labels.csv)";
    text += framing_text(images_.resize_shorter_side());
    text += images_.loading_text();
    if (skipped_ > 0)
      text += ", " + std::to_string(skipped_) + (skipped_ == 1 ? " unreadable image" : " unreadable images") + " skipped";
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

  int load_window(std::size_t index, const WindowChooser& choose, bool mirror, float* out,
                  float* scratch) const override {
    check_index(index);
    if (!images_.load_window(index, choose, mirror, out)) Dataset::load_window(index, choose, mirror, out, scratch);
    return 0;
  }

  void load_target(std::size_t index, void* out) const override {
    check_index(index);
    const std::size_t k = names_.size();
    std::copy_n(targets_.data() + index * k, k, static_cast<float*>(out));
  }

  std::size_t host_bytes() const override { return images_.host_bytes() + targets_.size() * sizeof(float); }

 private:
  void check_index(std::size_t index) const {
    if (index >= size())
      fail(side_, "index " + std::to_string(index) + " out of range: the folder holds " + std::to_string(size()) +
                      " images");
  }

  fs::path side_;
  Task task_;
  ImageSamples images_;
  std::vector<std::string> names_;
  std::vector<float> targets_;
  std::size_t skipped_;
};

// Multilabel unless asked for regress or a value is neither 0 nor 1; asked for multilabel, such a
// value is a DataError naming it.
Task decide_task(const fs::path& csv, const LabelsTable& table, std::optional<Task> asked) {
  if (asked && *asked != Task::multilabel && *asked != Task::regress)
    throw ConfigError("open_image_table: the task is multilabel or regress, not " + to_string(*asked));
  if (asked == Task::regress) return Task::regress;
  const std::size_t k = table.names.size();
  for (std::size_t i = 0; i < table.values.size(); ++i) {
    const float v = table.values[i];
    if (v == 0.0f || v == 1.0f) continue;
    if (!asked) return Task::regress;
    char text[32];
    std::snprintf(text, sizeof text, "%g", static_cast<double>(v));
    fail(csv, "line " + std::to_string(table.lines[i / k]) + ", column '" + table.names[i % k] + "': the value " +
                  text + " is not a label: a multi-label data set's values are 0 or 1");
  }
  return Task::multilabel;
}

}  // namespace

std::unique_ptr<Dataset> open_image_table(const fs::path& side, SampleShape target, std::optional<Task> task,
                                          const std::vector<std::string>& expected_names,
                                          const ImageFolderOptions& options) {
  const fs::path csv = side / "labels.csv", images_folder = side / "images";
  LabelsTable table = read_labels_csv(csv, expected_names);
  const Task decided = decide_task(csv, table, task);

  // Each row's image, by its path under images/ as the row writes it.
  std::map<std::string, fs::path> image_at;
  for (fs::path& image : scan_image_tree(images_folder))
    image_at.emplace(image.lexically_relative(images_folder).generic_string(), std::move(image));
  std::vector<fs::path> files;
  for (std::size_t r = 0; r < table.files.size(); ++r) {
    const auto it = image_at.find(table.files[r]);
    if (it == image_at.end())
      fail(csv, "line " + std::to_string(table.lines[r]) + " names '" + escape_non_utf8(table.files[r]) +
                    "', which is not an image under " + full_path(images_folder));
    files.push_back(it->second);
    it->second.clear();  // has its row
  }
  for (const auto& [name, image] : image_at)
    if (!image.empty()) fail(image, "an image without a row in " + full_path(csv) + ": expected a row '" + name + ",...'");

  const SampleShape shape = resolve_target(side, target, files, options);
  const std::size_t n = files.size();
  ImageSamples images(std::move(files), shape, decode_at_open(n, shape.elements(), options.eager_decode_limit),
                      options.max_decoded_image_bytes, options.resize_shorter_side);
  const std::vector<std::string> errors =
      check_each(n, options.skip_corrupt, [&](std::size_t i) { images.open(i); });
  const std::size_t skipped = report_skipped(errors, options);
  images.keep_passed(errors);
  images.keep_decoded(options.cache, full_path(side));
  keep_passed(table.values, errors, table.names.size());
  if (images.size() == 0) fail(images_folder, "no image left that can be read (" + std::to_string(skipped) + " skipped)");
  return std::make_unique<ImageTableDataset>(side, decided, std::move(images), std::move(table.names),
                                             std::move(table.values), skipped);
}

}  // namespace cnn::data
