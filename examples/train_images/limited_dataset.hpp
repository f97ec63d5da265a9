#pragma once
// The first N samples of a data set (--limit), for quick runs.
#include "data/dataset.hpp"

namespace cnn::app {

class LimitedDataset final : public data::Dataset {
 public:
  LimitedDataset(const data::Dataset& base, std::size_t limit) : base_(base), size_(std::min(limit, base.size())) {}
  std::size_t size() const override { return size_; }
  data::SampleShape shape() const override { return base_.shape(); }
  int num_classes() const override { return base_.num_classes(); }
  std::vector<std::string> class_names() const override { return base_.class_names(); }
  std::string description() const override;
  int load(std::size_t index, float* out) const override { return base_.load(index, out); }
  std::size_t host_bytes() const override { return base_.host_bytes(); }

 private:
  const data::Dataset& base_;
  std::size_t size_;
};

}  // namespace cnn::app
