// The element-wise product's shapes, gradients and type ("mul NAME", ONNX Mul, whose broadcasting
// of [N, C, 1, 1] over [N, C, H, W] is ours).
#include <cnnengine/engine/core/backend.hpp>
#include "layers/multiply.hpp"

#include <cnnengine/layers/builtin_layers.hpp>
#include <cnnengine/layers/registry.hpp>

namespace cnn {

Shape Multiply::output_shape(const std::vector<Shape>& inputs) {
  if (inputs.size() != 2) throw ShapeError("multiply: needs two inputs, got " + std::to_string(inputs.size()));
  auto is_gate_of = [](const Shape& gate, const Shape& x) {
    return x.rank == 3 && gate.rank == 3 && gate[0] == x[0] && gate[1] == 1 && gate[2] == 1;
  };
  const Shape& a = inputs[0];
  const Shape& b = inputs[1];
  if (!(a == b) && !is_gate_of(b, a) && !is_gate_of(a, b))
    throw ShapeError("multiply: needs two inputs of one shape, or one of them Cx1x1 (a gate over the other's C "
                     "channels), got " + a.str() + " and " + b.str());
  full_ = is_gate_of(a, b) && !(a == b) ? 1 : 0;
  const Shape& full = inputs[full_];
  elements_ = static_cast<double>(full.elements());
  gate_elements_ = static_cast<double>(inputs[1 - full_].elements());
  return full;
}

void Multiply::backward(const LayerContext& c) {
  const Tensor none{};
  const std::size_t gate = 1 - full_;
  const bool d_full = wants_gradient(c, full_), d_gate = wants_gradient(c, gate);
  if (!d_full && !d_gate) return;
  c.backend->multiply_backward(c.inputs[full_], c.inputs[gate], c.grad_output, d_full ? c.grad_inputs[full_] : none,
                               d_full && c.accumulate[full_], d_gate ? c.grad_inputs[gate] : none,
                               d_gate && c.accumulate[gate]);
}

LayerType multiply_type() {
  LayerType type;
  type.type_name = "multiply";
  type.layer_class = &typeid(Multiply);
  type.word = "mul";
  type.usage = "mul NAME";
  type.parse = [](LayerLine& line) {
    line.expect_arguments(1);
    line.read_named_output(0);
    return std::make_unique<Multiply>();
  };
  type.text = [](const Layer&, std::span<const std::string> input_names) { return input_names[1]; };
  type.onnx = [](const Layer&, OnnxNodes& graph) { graph.add_output_node("Mul", {graph.input(0), graph.input(1)}); };
  return type;
}

std::unique_ptr<Layer> layers::multiply() { return std::make_unique<Multiply>(); }

}  // namespace cnn
