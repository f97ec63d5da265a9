#pragma once
#include <cnnengine/engine/core/backend.hpp>
#include <cnnengine/engine/core/layer.hpp>

namespace cnn {

struct LayerType;

// MaxPool2D, AvgPool2D and, with global = true, global average or max pooling (output Cx1x1).
// ceil_mode: PyTorch's, the output size rounded up (but no window starting in the right or bottom
// padding), the last windows clipped to the input; an average then divides by the window's part
// inside the input (padding is never counted).
class Pool2D final : public Layer {
 public:
  // stride 0: = window
  Pool2D(PoolMode mode, int window, int stride = 0, int padding = 0, bool ceil_mode = false);
  static Pool2D global_average();
  static Pool2D global_max();
  // "maxpool2d", "avgpool2d", "global_avgpool" or "global_maxpool"
  std::string type_name() const override;
  std::string describe() const override;
  Shape output_shape(const std::vector<Shape>& inputs) override;
  // The CPU's pooling backward reads x and y (CUDA's x alone), so both stay alive.
  bool backward_needs_input() const override { return true; }
  bool backward_needs_output() const override { return true; }
  bool packed_values() const override { return true; }
  bool takes_channels_last() const override { return true; }
  void forward(const LayerContext& c) override { c.backend->pool2d_forward(desc_, c.inputs[0], c.output); }
  void backward(const LayerContext& c) override;
  const Pool2dDesc& desc() const { return desc_; }
  bool is_global() const { return global_; }
  bool ceil_mode() const { return ceil_mode_; }
  // The output length along an axis of `length` (window, stride and padding of that axis).
  int pooled_length(int length, int window, int stride, int padding) const;
  bool recomputable() const override { return true; }
  bool is_max_pooling() const override { return desc_.mode == PoolMode::max; }
  LayerCost forward_cost() const override;

 private:
  Pool2dDesc desc_;
  bool global_ = false;
  bool ceil_mode_ = false;
  double in_elements_ = 0, out_elements_ = 0;  // per sample
};

// "maxpool WINDOW [stride=S] [pad=P] [ceil=0|1]", "avgpool WINDOW [stride=S] [pad=P] [ceil=0|1]",
// "globalavgpool" and "globalmaxpool" in network text; MaxPool, AveragePool, GlobalAveragePool and
// GlobalMaxPool in ONNX.
LayerType max_pool2d_type();
LayerType average_pool2d_type();
LayerType global_average_pool_type();
LayerType global_max_pool_type();

}  // namespace cnn
