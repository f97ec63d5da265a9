#pragma once
#include "engine/core/layer.hpp"

namespace cnn {

// MaxPool2D, AvgPool2D and, with global = true, global average pooling (output Cx1x1).
class Pool2D final : public Layer {
 public:
  Pool2D(PoolMode mode, int window, int stride = 0, int padding = 0);  // stride 0: = window
  static Pool2D global_average();
  LayerKind kind() const override;
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
  LayerCost forward_cost() const override;

 private:
  Pool2dDesc desc_;
  bool global_ = false;
  double in_elements_ = 0, out_elements_ = 0;  // per sample
};

}  // namespace cnn
