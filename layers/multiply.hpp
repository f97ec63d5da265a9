#pragma once
// The element-wise product of two inputs (PyTorch's a * b): of one shape, or one of them C x 1 x 1,
// one factor per channel over H and W (the squeeze-and-excitation gate), on either side.
#include <cnnengine/engine/core/backend.hpp>
#include <cnnengine/engine/core/layer.hpp>

namespace cnn {

struct LayerType;

class Multiply final : public Layer {
 public:
  std::string type_name() const override { return "multiply"; }
  std::string describe() const override { return "multiply"; }
  int input_count() const override { return 2; }
  Shape output_shape(const std::vector<Shape>& inputs) override;
  // Each input's gradient is the output gradient times the other input.
  bool backward_needs_input() const override { return true; }
  bool recomputable() const override { return true; }
  bool cheap_to_recompute() const override { return true; }
  LayerCost forward_cost() const override { return {elements_, sizeof(float) * (2 * elements_ + gate_elements_)}; }
  void forward(const LayerContext& c) override { c.backend->multiply(c.inputs[full_], c.inputs[1 - full_], c.output); }
  void backward(const LayerContext& c) override;

 private:
  std::size_t full_ = 0;  // the input of the output's shape; the other may be the gate
  double elements_ = 0, gate_elements_ = 0;  // per sample
};

// "mul NAME" in network text (the previous output times the named one); Mul in ONNX.
LayerType multiply_type();

}  // namespace cnn
