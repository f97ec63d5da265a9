#pragma once
#include "cnnengine/engine/layer.hpp"

namespace cnn {

class ReLU final : public Layer {
 public:
  LayerKind kind() const override { return LayerKind::relu; }
  std::string describe() const override { return "relu"; }
  Shape output_shape(const std::vector<Shape>& inputs) override { return inputs.at(0); }
  bool backward_needs_output() const override { return true; }
  void forward(const LayerContext& c) override { c.backend->relu_forward(c.inputs[0], c.output); }
  void backward(const LayerContext& c) override {
    if (wants_gradient(c, 0)) c.backend->relu_backward(c.output, c.grad_output, c.grad_inputs[0], c.accumulate[0]);
  }
};

}  // namespace cnn
