// A data set under other class names: a names file's, for data whose own names are numbers (IDX).
#include <algorithm>
#include <set>

#include <cnnengine/base/error.hpp>
#include "data/data_error.hpp"
#include <cnnengine/data/dataset.hpp>
#include "data/detail/class_names_file.hpp"

namespace cnn::data {
namespace {

class NamedClasses final : public Dataset {
 public:
  NamedClasses(std::unique_ptr<Dataset> base, std::vector<std::string> names)
      : base_(std::move(base)), names_(std::move(names)) {}
  std::size_t size() const override { return base_->size(); }
  SampleShape shape() const override { return base_->shape(); }
  int num_classes() const override { return base_->num_classes(); }
  std::vector<std::string> class_names() const override { return names_; }
  std::string description() const override { return base_->description(); }
  Task task() const override { return base_->task(); }
  int resize_shorter_side() const override { return base_->resize_shorter_side(); }
  int load(std::size_t index, float* out) const override { return base_->load(index, out); }
  int load_window(std::size_t index, const WindowChooser& choose, bool mirror, float* out,
                  float* scratch) const override {
    return base_->load_window(index, choose, mirror, out, scratch);
  }
  void load_target(std::size_t index, void* out) const override { base_->load_target(index, out); }
  int label(std::size_t index) const override { return base_->label(index); }
  std::size_t host_bytes() const override { return base_->host_bytes(); }

 private:
  std::unique_ptr<Dataset> base_;
  std::vector<std::string> names_;
};

}  // namespace

const std::vector<std::string>& fashion_mnist_classes() {
  static const std::vector<std::string> names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                 "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return names;
}

std::unique_ptr<Dataset> with_class_names(std::unique_ptr<Dataset> data, std::vector<std::string> names) {
  if (!data) throw ConfigError("with_class_names: no data set (null)");
  if (names.size() != static_cast<std::size_t>(std::max(data->num_classes(), 0)))
    throw ConfigError(std::to_string(names.size()) + " class names for " + data->description() + ", which has " +
                      std::to_string(data->num_classes()) + " classes");
  if (std::set<std::string>(names.begin(), names.end()).size() != names.size())
    throw ConfigError("class names must differ from one another: a name is repeated among those for " +
                      data->description());
  return std::make_unique<NamedClasses>(std::move(data), std::move(names));
}

void name_classes(DatasetSplits& splits, const std::filesystem::path& names_file) {
  if (!splits.train) throw ConfigError("name_classes: no training data (null)");
  // A names file that was asked for must be there: missing, it is a mistake, not numbered classes.
  const std::vector<std::string> names = read_class_names(names_file);
  if (names.size() != static_cast<std::size_t>(std::max(splits.train->num_classes(), 0)))
    fail(names_file, "expected " + std::to_string(splits.train->num_classes()) + " class names, one a line, found " +
                         std::to_string(names.size()));
  for (std::unique_ptr<Dataset>* side : {&splits.train, &splits.test, &splits.validation})
    if (*side) *side = with_class_names(std::move(*side), names);
}

}  // namespace cnn::data
