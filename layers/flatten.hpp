#pragma once
#include "layers/layer.hpp"

namespace cnn {

// CxHxW -> C*H*W. A view: the engine aliases its output to its input and never runs it.
class Flatten final : public Layer {
 public:
  std::string kind() const override { return "flatten"; }
  std::string describe() const override { return "flatten"; }
  Shape output_shape(const std::vector<Shape>& inputs) override {
    return Shape{static_cast<int>(inputs.at(0).elements())};
  }
  bool is_view() const override { return true; }
  void forward(const LayerContext&) override {}
  void backward(const LayerContext&) override {}
};

}  // namespace cnn
