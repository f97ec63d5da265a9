#pragma once
#include "engine/core/layer.hpp"

namespace cnn {

struct LayerType;

// MaxPool2D, AvgPool2D and, with global = true, global average pooling (output Cx1x1).
class Pool2D final : public Layer {
 public:
  Pool2D(PoolMode mode, int window, int stride = 0, int padding = 0);  // stride 0: = window
  static Pool2D global_average();
  std::string type_name() const override;  // "maxpool2d", "avgpool2d" or "global_avgpool"
  std::string describe() const override;
  Shape output_shape(const std::vector<Shape>& inputs) override;
  // cuDNN's pooling backward takes x and y for every mode, so both stay alive.
  bool backward_needs_input() const override { return true; }
  bool backward_needs_output() const override { return true; }
  void forward(const LayerContext& c) override { c.backend->pool2d_forward(desc_, c.inputs[0], c.output); }
  void backward(const LayerContext& c) override;
  const Pool2dDesc& desc() const { return desc_; }
  bool is_global() const { return global_; }
  bool recomputable() const override { return true; }
  bool is_max_pooling() const override { return !global_ && desc_.mode == PoolMode::max; }
  LayerCost forward_cost() const override;

 private:
  Pool2dDesc desc_;
  bool global_ = false;
  double in_elements_ = 0, out_elements_ = 0;  // per sample
};

// "maxpool WINDOW [stride=S] [pad=P]", "avgpool WINDOW [stride=S] [pad=P]" and "globalavgpool" in
// network text; MaxPool, AveragePool and GlobalAveragePool in ONNX.
LayerType max_pool2d_type();
LayerType average_pool2d_type();
LayerType global_average_pool_type();

}  // namespace cnn
