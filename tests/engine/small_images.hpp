#pragma once
// A data set of `count` generated 1 x 12 x 12 images in four classes, for the tests of loaders
// feeding a trainer (the batch size, the staging budget).
#include <cstddef>
#include <string>
#include <vector>

#include <cnnengine/data/dataset.hpp>

namespace cnn::testing {

class SmallImages final : public data::Dataset {
 public:
  explicit SmallImages(std::size_t count) : count_(count) {}
  std::size_t size() const override { return count_; }
  data::SampleShape shape() const override { return {1, 12, 12}; }
  int num_classes() const override { return 4; }
  std::vector<std::string> class_names() const override { return {"a", "b", "c", "d"}; }
  std::string description() const override { return "small images"; }
  std::size_t host_bytes() const override { return 0; }
  int load(std::size_t index, float* out) const override {
    for (int k = 0; k < 144; ++k) out[k] = static_cast<float>((index * 7 + static_cast<std::size_t>(k)) % 11) / 11.f;
    return static_cast<int>(index % 4);
  }

 private:
  std::size_t count_;
};

}  // namespace cnn::testing
