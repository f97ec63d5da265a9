#pragma once
// Constant padding of H and W, each side its own (PyTorch's nn.ConstantPad2d and ZeroPad2d, F.pad
// on the last two dims; ONNX's Pad in constant mode): C x H x W to C x (T + H + B) x (L + W + R).
// What an imported model's convolution or pooling padded unevenly (TensorFlow's SAME at stride
// 2) becomes in front of it.
#include <cnnengine/engine/core/backend.hpp>
#include <cnnengine/engine/core/layer.hpp>

namespace cnn {

struct LayerType;

class Pad final : public Layer {
 public:
  // Each side 0 to kMaxPad, the value not NaN (-infinity pads for a max pooling), else a ConfigError.
  static constexpr int kMaxPad = 1 << 16;
  explicit Pad(const PadDesc& desc);
  std::string type_name() const override { return "pad"; }
  std::string describe() const override;
  Shape output_shape(const std::vector<Shape>& inputs) override;
  bool recomputable() const override { return true; }
  bool cheap_to_recompute() const override { return true; }
  LayerCost forward_cost() const override;
  void forward(const LayerContext& c) override { c.backend->pad_forward(desc_, c.inputs[0], c.output); }
  void backward(const LayerContext& c) override {
    if (wants_gradient(c, 0)) c.backend->pad_backward(desc_, c.grad_output, c.grad_inputs[0], c.accumulate[0]);
  }
  const PadDesc& desc() const { return desc_; }

 private:
  PadDesc desc_;
  double in_elements_ = 0, out_elements_ = 0;  // per sample
};

// "pad P" (every side) or "pad LEFT RIGHT TOP BOTTOM", [value=V] (0) in network text; in ONNX, a
// Pad in constant mode.
LayerType pad_type();

}  // namespace cnn
