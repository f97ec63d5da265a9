#pragma once
#include <cnnengine/engine/core/backend.hpp>
#include <cnnengine/engine/core/layer.hpp>

namespace cnn {

struct LayerType;

class ReLU final : public Layer {
 public:
  std::string type_name() const override { return "relu"; }
  std::string describe() const override { return "relu"; }
  Shape output_shape(const std::vector<Shape>& inputs) override {
    elements_ = static_cast<double>(inputs.at(0).elements());
    return inputs.at(0);
  }
  bool backward_needs_output() const override { return true; }
  bool runs_in_place() const override { return true; }
  bool recomputable() const override { return true; }
  bool cheap_to_recompute() const override { return true; }
  bool packed_values() const override { return true; }
  bool takes_channels_last() const override { return true; }  // element-wise
  bool commutes_with_max_pooling() const override { return true; }
  bool is_relu() const override { return true; }
  LayerCost forward_cost() const override { return {elements_, 2 * sizeof(float) * elements_}; }
  void forward(const LayerContext& c) override { c.backend->relu_forward(c.inputs[0], c.output); }
  void backward(const LayerContext& c) override {
    if (wants_gradient(c, 0)) c.backend->relu_backward(c.output, c.grad_output, c.grad_inputs[0], c.accumulate[0]);
  }

 private:
  double elements_ = 0;  // per sample
};

// "relu" in network text; Relu in ONNX.
LayerType relu_type();

}  // namespace cnn
