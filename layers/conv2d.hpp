#pragma once
#include "engine/core/layer.hpp"

namespace cnn {

struct LayerType;

class Conv2D final : public Layer {
 public:
  Conv2D(int out_channels, int kernel, int stride = 1, int padding = 0, bool bias = true);
  std::string type_name() const override { return "conv2d"; }
  std::string describe() const override;
  Shape output_shape(const std::vector<Shape>& inputs) override;
  std::vector<ParamSpec> parameters() const override;
  std::size_t workspace_bytes(Backend& backend, int batch, ConvPass pass, std::size_t limit) override;
  bool backward_needs_input() const override { return true; }
  void forward(const LayerContext& c) override;
  void backward(const LayerContext& c) override;
  bool recomputable() const override { return true; }
  LayerCost forward_cost() const override;
  const Conv2dDesc& desc() const { return desc_; }
  bool has_bias() const { return bias_; }

 private:
  Conv2dDesc desc_;
  bool bias_;
  Shape in_, out_;
};

// "conv OUT KERNEL [stride=S] [pad=P] [bias=0|1]" in network text; Conv in ONNX.
LayerType conv2d_type();

}  // namespace cnn
