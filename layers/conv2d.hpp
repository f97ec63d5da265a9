#pragma once
// The 2-D convolution (PyTorch's Conv2d): grouped and dilated, and its depthwise form (groups =
// channels, as many outputs as inputs), which is the same class under its own type word.
#include <cnnengine/engine/core/backend.hpp>
#include <cnnengine/engine/core/layer.hpp>
#include <cnnengine/layers/builtin_layers.hpp>

namespace cnn {

struct LayerType;

class Conv2D final : public Layer {
 public:
  Conv2D(int out_channels, int kernel, int stride = 1, int padding = 0, bool bias = true);
  // same_padding: padding = dilation x (kernel - 1) / 2 (odd kernels at stride 1 only; options.padding
  // is then ignored).
  Conv2D(int out_channels, int kernel, const layers::ConvOptions& options, bool same_padding = false);
  // Depthwise: one filter per channel; the channel count comes from the input.
  static Conv2D depthwise(int kernel, const layers::ConvOptions& options, bool same_padding = false);

  std::string type_name() const override { return depthwise_ ? "depthwise_conv2d" : "conv2d"; }
  std::string describe() const override;
  Shape output_shape(const std::vector<Shape>& inputs) override;
  std::vector<ParamSpec> parameters() const override;
  std::size_t workspace_bytes(Backend& backend, int batch, ConvPass pass, std::size_t limit) override;
  bool backward_needs_input() const override { return true; }
  void forward(const LayerContext& c) override;
  void backward(const LayerContext& c) override;
  ReluAfter relu_after() const override { return ReluAfter::convolution; }
  void forward_then_relu(const LayerContext& c) override;
  bool recomputable() const override { return true; }
  bool packed_values() const override { return true; }
  bool takes_channels_last() const override { return true; }
  bool takes_nchw_input() const override { return true; }
  void use_orders(const std::vector<bool>& inputs_channels_last, bool output_channels_last) override {
    in_.channels_last = inputs_channels_last[0];
    out_.channels_last = output_channels_last;
  }
  LayerCost forward_cost() const override;
  const Conv2dDesc& desc() const { return desc_; }
  bool has_bias() const { return bias_; }
  bool is_depthwise() const { return depthwise_; }
  bool same_padding() const { return same_; }

 private:
  Conv2D() = default;
  void configure(int out_channels, int kernel, const layers::ConvOptions& options, bool same_padding);

  Conv2dDesc desc_;
  bool bias_ = true;
  bool depthwise_ = false;
  bool same_ = false;
  Shape in_, out_;
};

// "conv OUT KERNEL [stride=S] [pad=P|same] [dilation=D] [groups=G] [bias=0|1]" in network text;
// Conv in ONNX.
LayerType conv2d_type();
// "dwconv KERNEL [stride=S] [pad=P|same] [dilation=D] [bias=0|1]" (depthwise: groups = channels).
LayerType depthwise_conv2d_type();

}  // namespace cnn
