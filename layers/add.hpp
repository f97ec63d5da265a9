#pragma once
#include <cnnengine/engine/core/backend.hpp>
#include <cnnengine/engine/core/layer.hpp>

namespace cnn {

struct LayerType;

// Residual addition of two inputs of the same shape.
class Add final : public Layer {
 public:
  std::string type_name() const override { return "add"; }
  std::string describe() const override { return "add"; }
  int input_count() const override { return 2; }
  Shape output_shape(const std::vector<Shape>& inputs) override {
    if (inputs.size() != 2 || !(inputs[0] == inputs[1]))
      throw ShapeError("add: needs two inputs of one shape, got " + inputs.at(0).str() + " and " +
                       (inputs.size() > 1 ? inputs[1].str() : std::string("nothing")));
    elements_ = static_cast<double>(inputs[0].elements());
    return inputs[0];
  }
  bool recomputable() const override { return true; }
  bool cheap_to_recompute() const override { return true; }
  bool packed_values() const override { return true; }
  bool takes_channels_last() const override { return true; }  // element-wise
  bool is_add() const override { return true; }
  LayerCost forward_cost() const override { return {elements_, 3 * sizeof(float) * elements_}; }
  void forward(const LayerContext& c) override { c.backend->add(c.inputs[0], c.inputs[1], c.output); }
  // An input's gradient may be the output's own buffer (Note [BatchNorm, add and ReLU in one pass],
  // step_plan.cpp): copy_or_add then has nothing to copy.
  void backward(const LayerContext& c) override {
    for (std::size_t i = 0; i < 2; ++i)
      if (wants_gradient(c, i)) c.backend->copy_or_add(c.grad_output, c.grad_inputs[i], c.accumulate[i]);
  }

 private:
  double elements_ = 0;  // per sample
};

// "add NAME" in network text (the named output added to the previous one); Add in ONNX.
LayerType add_type();

}  // namespace cnn
