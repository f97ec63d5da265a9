#pragma once
// The element-wise activations besides ReLU (ActivationDesc in engine/core/backend.hpp): one
// layer class for all eight, which differ only in the backend's formula, and in whether backward
// reads the output or the input (derivative_from_output).
#include <cnnengine/engine/core/backend.hpp>
#include <cnnengine/engine/core/layer.hpp>

namespace cnn {

struct LayerType;

class ActivationLayer final : public Layer {
 public:
  // A ConfigError naming the layer for a slope that is not finite (leaky_relu; any finite
  // slope, negative ones too, as PyTorch's LeakyReLU).
  explicit ActivationLayer(ActivationDesc desc);

  const ActivationDesc& desc() const { return desc_; }
  // "leaky_relu", "relu6", "sigmoid", "tanh", "silu", "gelu", "hardswish", "hardsigmoid".
  std::string type_name() const override;
  std::string describe() const override;
  Shape output_shape(const std::vector<Shape>& inputs) override {
    elements_ = static_cast<double>(inputs.at(0).elements());
    return inputs.at(0);
  }
  // Backward reads one of the two: the output where the derivative is a function of it (forward
  // may then run in place), the input otherwise.
  bool backward_needs_output() const override { return derivative_from_output(desc_); }
  bool backward_needs_input() const override { return !derivative_from_output(desc_); }
  bool runs_in_place() const override { return derivative_from_output(desc_); }
  bool recomputable() const override { return true; }
  bool cheap_to_recompute() const override { return true; }
  bool takes_channels_last() const override { return true; }  // element-wise
  bool commutes_with_max_pooling() const override;
  LayerCost forward_cost() const override;
  void forward(const LayerContext& c) override { c.backend->activation_forward(desc_, c.inputs[0], c.output); }
  void backward(const LayerContext& c) override;

 private:
  ActivationDesc desc_;
  double elements_ = 0;  // per sample
};

// Network text: "leakyrelu [slope=A]", "relu6", "sigmoid", "tanh", "silu", "gelu", "hardswish",
// "hardsigmoid". ONNX (opset 13): LeakyRelu, Clip, Sigmoid, Tanh, Sigmoid and Mul, the erf form
// of GELU, HardSigmoid (and Mul for hardswish).
LayerType leaky_relu_type();
LayerType relu6_type();
LayerType sigmoid_type();
LayerType tanh_type();
LayerType silu_type();
LayerType gelu_type();
LayerType hardswish_type();
LayerType hardsigmoid_type();

}  // namespace cnn
