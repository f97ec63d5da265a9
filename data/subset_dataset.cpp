#include "data/subset_dataset.hpp"

#include <algorithm>

#include "data/data_error.hpp"
#include "data/detail/random.hpp"

namespace cnn::data {
namespace {

class SubsetDataset final : public Dataset {
 public:
  SubsetDataset(std::shared_ptr<const Dataset> base, std::vector<std::size_t> indices, std::string role,
                std::size_t base_bytes_share)
      : base_(std::move(base)), indices_(std::move(indices)), role_(std::move(role)), base_bytes_(base_bytes_share) {}

  std::size_t size() const override { return indices_.size(); }
  SampleShape shape() const override { return base_->shape(); }
  int num_classes() const override { return base_->num_classes(); }
  std::vector<std::string> class_names() const override { return base_->class_names(); }
  std::string description() const override {
    return base_->description() + "; " + role_ + ": " + std::to_string(size()) + " of them";
  }
  int label(std::size_t index) const override { return base_->label(base_index(index)); }
  int load(std::size_t index, float* out) const override { return base_->load(base_index(index), out); }
  std::size_t host_bytes() const override { return base_bytes_ + indices_.size() * sizeof(std::size_t); }

 private:
  std::size_t base_index(std::size_t index) const {
    if (index >= indices_.size()) {
      throw DataError(base_->description() + ": " + role_ + " index " + std::to_string(index) +
                      " out of range: the split holds " + std::to_string(indices_.size()) + " samples");
    }
    return indices_[index];
  }

  std::shared_ptr<const Dataset> base_;
  std::vector<std::size_t> indices_;
  std::string role_;
  std::size_t base_bytes_;
};

}  // namespace

Split stratified_split(std::shared_ptr<const Dataset> base, std::uint64_t seed) {
  if (!base) throw ConfigError("stratified_split: no data set (null)");
  const std::size_t classes = static_cast<std::size_t>(std::max(base->num_classes(), 0));
  std::vector<std::vector<std::size_t>> by_class(classes);
  for (std::size_t i = 0; i < base->size(); ++i) {
    const int label = base->label(i);
    if (label < 0 || static_cast<std::size_t>(label) >= classes)
      throw DataError(base->description() + ": sample " + std::to_string(i) + " has label " + std::to_string(label) +
                      ", outside its " + std::to_string(classes) + " classes");
    by_class[static_cast<std::size_t>(label)].push_back(i);
  }
  std::vector<std::size_t> train, test;
  for (std::size_t c = 0; c < classes; ++c) {
    std::vector<std::size_t>& members = by_class[c];
    std::size_t held = members.size() < 2 ? 0 : std::max<std::size_t>(1, (members.size() + 3) / 6);
    SplitMix64 rng(hash_values(seed, c, 0x5EED5EEDull));
    shuffle(members, rng);
    test.insert(test.end(), members.begin(), members.begin() + static_cast<std::ptrdiff_t>(held));
    train.insert(train.end(), members.begin() + static_cast<std::ptrdiff_t>(held), members.end());
  }
  std::sort(train.begin(), train.end());
  std::sort(test.begin(), test.end());

  const std::size_t total_bytes = base->host_bytes();
  const std::size_t test_bytes = base->size() ? total_bytes / base->size() * test.size() : 0;
  const std::string held_out = "held out 1/6 per class, seed " + std::to_string(seed);
  Split split;
  split.test = std::make_unique<SubsetDataset>(base, std::move(test), "test split (" + held_out + ")", test_bytes);
  split.train = std::make_unique<SubsetDataset>(base, std::move(train), "train split (rest)", total_bytes - test_bytes);
  return split;
}

}  // namespace cnn::data
