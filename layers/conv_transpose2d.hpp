#pragma once
// The transposed convolution (PyTorch's ConvTranspose2d, groups 1, dilation 1): the adjoint of a
// convolution, made of the backend's convolution calls on that convolution (in_channels = this
// layer's outputs, out_channels = its inputs) and a channel bias.
#include <cnnengine/engine/core/backend.hpp>
#include <cnnengine/engine/core/layer.hpp>

namespace cnn {

struct LayerType;

class ConvTranspose2D final : public Layer {
 public:
  ConvTranspose2D(int out_channels, int kernel, int stride = 1, int padding = 0, int output_padding = 0,
                  bool bias = true);
  std::string type_name() const override { return "conv_transpose2d"; }
  std::string describe() const override;
  Shape output_shape(const std::vector<Shape>& inputs) override;
  std::vector<ParamSpec> parameters() const override;
  std::size_t workspace_bytes(Backend& backend, int batch, ConvPass pass, std::size_t limit) override;
  bool backward_needs_input() const override { return true; }
  void forward(const LayerContext& c) override;
  void backward(const LayerContext& c) override;
  bool recomputable() const override { return true; }
  LayerCost forward_cost() const override;

  int out_channels() const { return out_channels_; }
  int kernel() const { return adjoint_.kernel_h; }
  int stride() const { return adjoint_.stride; }
  int padding() const { return adjoint_.padding; }
  int output_padding() const { return output_padding_; }
  bool has_bias() const { return bias_; }
  // The convolution whose adjoint this layer is: from this layer's output to its input.
  const Conv2dDesc& adjoint() const { return adjoint_; }

 private:
  int out_channels_;
  int output_padding_;
  bool bias_;
  Conv2dDesc adjoint_;
  Shape in_, out_;
};

// "deconv OUT KERNEL [stride=S] [pad=P] [output_pad=Q] [bias=0|1]" in network text;
// ConvTranspose in ONNX.
LayerType conv_transpose2d_type();

}  // namespace cnn
