#pragma once
// Upsampling by a whole factor (PyTorch's nn.Upsample(scale_factor=F, mode=...), bilinear with
// align_corners=False): C x H x W to C x FH x FW.
#include <cnnengine/engine/core/backend.hpp>
#include <cnnengine/engine/core/layer.hpp>

namespace cnn {

struct LayerType;

class Upsample final : public Layer {
 public:
  Upsample(int factor, UpsampleMode mode);  // factor >= 1, else a ConfigError
  std::string type_name() const override { return "upsample"; }
  std::string describe() const override;
  Shape output_shape(const std::vector<Shape>& inputs) override;
  bool recomputable() const override { return true; }
  bool cheap_to_recompute() const override { return true; }
  LayerCost forward_cost() const override;
  void forward(const LayerContext& c) override { c.backend->upsample_forward(desc_, c.inputs[0], c.output); }
  void backward(const LayerContext& c) override {
    if (wants_gradient(c, 0)) c.backend->upsample_backward(desc_, c.grad_output, c.grad_inputs[0], c.accumulate[0]);
  }
  const UpsampleDesc& desc() const { return desc_; }

 private:
  UpsampleDesc desc_;
  double in_elements_ = 0, out_elements_ = 0;  // per sample
};

// "upsample FACTOR [mode=nearest|bilinear]" in network text; in ONNX, Resize (nearest) or two
// MatMuls by the interpolation matrices (bilinear).
LayerType upsample_type();

}  // namespace cnn
