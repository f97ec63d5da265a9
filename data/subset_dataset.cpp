#include "data/subset_dataset.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "data/data_error.hpp"
#include "data/detail/random.hpp"

namespace cnn::data {
namespace {

class SubsetDataset final : public Dataset {
 public:
  // Described as "<base's description>; <role>: <size> of them", or as `description` when given.
  SubsetDataset(std::shared_ptr<const Dataset> base, std::vector<std::size_t> indices, std::string role,
                std::size_t base_bytes_share, std::string description = {})
      : base_(std::move(base)), indices_(std::move(indices)), role_(std::move(role)), base_bytes_(base_bytes_share),
        description_(description.empty()
                         ? base_->description() + "; " + role_ + ": " + std::to_string(indices_.size()) + " of them"
                         : std::move(description)) {}

  std::size_t size() const override { return indices_.size(); }
  SampleShape shape() const override { return base_->shape(); }
  int num_classes() const override { return base_->num_classes(); }
  std::vector<std::string> class_names() const override { return base_->class_names(); }
  std::string description() const override { return description_; }
  Task task() const override { return base_->task(); }
  int resize_shorter_side() const override { return base_->resize_shorter_side(); }
  int label(std::size_t index) const override { return base_->label(base_index(index)); }
  int load(std::size_t index, float* out) const override { return base_->load(base_index(index), out); }
  int load_window(std::size_t index, const WindowChooser& choose, bool mirror, float* out,
                  float* scratch) const override {
    return base_->load_window(base_index(index), choose, mirror, out, scratch);
  }
  void load_target(std::size_t index, void* out) const override { base_->load_target(base_index(index), out); }
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
  std::string description_;
};

struct HeldOut {
  std::vector<std::size_t> kept, held;
};

// Holds out round(fraction x n) of the n members (at least one where n >= 2, never all), chosen by
// `rng`.
void hold_out(std::vector<std::size_t> members, double fraction, SplitMix64 rng, HeldOut& out) {
  const std::size_t n = members.size();
  // + 1e-9: n x 1/6 lands on k + 0.5 exactly in rationals but may fall short of it in doubles.
  const auto rounded = static_cast<std::size_t>(static_cast<double>(n) * fraction + 0.5 + 1e-9);
  const std::size_t held = n < 2 ? 0 : std::clamp<std::size_t>(rounded, 1, n - 1);
  shuffle(members, rng);
  out.held.insert(out.held.end(), members.begin(), members.begin() + static_cast<std::ptrdiff_t>(held));
  out.kept.insert(out.kept.end(), members.begin() + static_cast<std::ptrdiff_t>(held), members.end());
}

// Holds out round(fraction x n) of each class of n samples (at least one where n >= 2, never all),
// shuffled by (seed, class, salt); of all n samples for a task other than classification,
// shuffled by (seed, salt). Both sides keep the base's order.
HeldOut hold_out_per_class(const Dataset& base, double fraction, std::uint64_t seed, std::uint64_t salt) {
  HeldOut out;
  if (base.task() != Task::classify) {
    // No class to stratify by: a segmentation's, a multi-label's classes are in each sample's target.
    std::vector<std::size_t> all(base.size());
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
    hold_out(std::move(all), fraction, SplitMix64(hash_values(seed, salt)), out);
  } else {
    const std::size_t classes = static_cast<std::size_t>(std::max(base.num_classes(), 0));
    std::vector<std::vector<std::size_t>> by_class(classes);
    for (std::size_t i = 0; i < base.size(); ++i) {
      const int label = base.label(i);
      if (label < 0 || static_cast<std::size_t>(label) >= classes)
        throw DataError(base.description() + ": sample " + std::to_string(i) + " has label " +
                        std::to_string(label) + ", outside its " + std::to_string(classes) + " classes");
      by_class[static_cast<std::size_t>(label)].push_back(i);
    }
    for (std::size_t c = 0; c < classes; ++c)
      hold_out(std::move(by_class[c]), fraction, SplitMix64(hash_values(seed, c, salt)), out);
  }
  std::sort(out.kept.begin(), out.kept.end());
  std::sort(out.held.begin(), out.held.end());
  return out;
}

// The base's host bytes shared out by sample count.
std::size_t bytes_share(const Dataset& base, std::size_t samples) {
  return base.size() ? base.host_bytes() / base.size() * samples : 0;
}

// A shared pointer that does not own: the caller's data set outlives what is made of it.
std::shared_ptr<const Dataset> borrowed(const Dataset& data) {
  return std::shared_ptr<const Dataset>(&data, [](const Dataset*) {});
}

}  // namespace

Split stratified_split(std::shared_ptr<const Dataset> base, std::uint64_t seed) {
  if (!base) throw ConfigError("stratified_split: no data set (null)");
  HeldOut parts = hold_out_per_class(*base, 1.0 / 6.0, seed, 0x5EED5EEDull);
  const std::size_t total_bytes = base->host_bytes(), test_bytes = bytes_share(*base, parts.held.size());
  const std::string held_out = "held out 1/6 per class, seed " + std::to_string(seed);
  Split split;
  split.test =
      std::make_unique<SubsetDataset>(base, std::move(parts.held), "test split (" + held_out + ")", test_bytes);
  split.train =
      std::make_unique<SubsetDataset>(base, std::move(parts.kept), "train split (rest)", total_bytes - test_bytes);
  return split;
}

ValidationSplit split_for_validation(const Dataset& data, double fraction, std::uint64_t seed) {
  char share[32];
  std::snprintf(share, sizeof share, "%g", fraction);
  if (!(fraction > 0 && fraction < 1))
    throw ConfigError("the validation split must be a fraction above 0 and below 1, not " + std::string(share));
  HeldOut parts = hold_out_per_class(data, fraction, seed, 0x7A11DA7Eull);
  if (parts.held.empty() || parts.kept.empty())
    throw ConfigError(data.description() + ": a validation split of " + std::string(share) +
                      " leaves no sample on one side (" +
                      (data.task() == Task::classify ? "every class needs" : "it needs") + " two samples or more)");
  const std::size_t total_bytes = data.host_bytes(), held_bytes = bytes_share(data, parts.held.size());
  ValidationSplit split;
  split.validation =
      std::make_unique<SubsetDataset>(borrowed(data), std::move(parts.held),
                                      "validation split (" + std::string(share) +
                                          (data.task() == Task::classify ? " per class" : "") + ", seed " +
                                          std::to_string(seed) + ")",
                                      held_bytes);
  split.train = std::make_unique<SubsetDataset>(borrowed(data), std::move(parts.kept), "training (the rest)",
                                                total_bytes - held_bytes);
  return split;
}

std::unique_ptr<Dataset> first_samples(const Dataset& data, std::size_t count) {
  std::vector<std::size_t> indices(std::min(count, data.size()));
  for (std::size_t i = 0; i < indices.size(); ++i) indices[i] = i;
  const std::size_t bytes = bytes_share(data, indices.size());
  const std::string description = "first " + std::to_string(indices.size()) + " of " + data.description();
  return std::make_unique<SubsetDataset>(borrowed(data), std::move(indices), "first samples", bytes, description);
}

}  // namespace cnn::data
