#pragma once
#include <cnnengine/engine/core/layer.hpp>

namespace cnn {

struct LayerType;

// Fully connected: y = x w^T + b over the flattened sample.
class Dense final : public Layer {
 public:
  explicit Dense(int units, bool bias = true);
  std::string type_name() const override { return "dense"; }
  std::string describe() const override { return "dense " + std::to_string(units_); }
  Shape output_shape(const std::vector<Shape>& inputs) override;
  std::vector<ParamSpec> parameters() const override;
  bool backward_needs_input() const override { return true; }
  std::size_t workspace_bytes(Backend& backend, int batch, ConvPass pass, std::size_t limit) override;
  void forward(const LayerContext& c) override;
  void backward(const LayerContext& c) override;
  int units() const { return units_; }
  bool has_bias() const { return bias_; }
  bool recomputable() const override { return true; }
  bool takes_channels_last() const override { return one_order(in_); }
  LayerCost forward_cost() const override;

 private:
  int units_;
  bool bias_;
  Shape in_;  // per sample
};

// "dense UNITS [bias=0|1]" in network text; Gemm in ONNX, after a Flatten where the input is an image.
LayerType dense_type();

}  // namespace cnn
