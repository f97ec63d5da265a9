// The element-wise product's shapes, gradients and type ("mul NAME", ONNX Mul, whose broadcasting
// of [N, C, 1, 1] over [N, C, H, W] is ours).
#include "layers/multiply.hpp"

#include "layers/builtin_layers.hpp"
#include "layers/registry.hpp"

namespace cnn {

Shape Multiply::output_shape(const std::vector<Shape>& inputs) {
  if (inputs.size() != 2) throw ShapeError("multiply: needs two inputs, got " + std::to_string(inputs.size()));
  const Shape& a = inputs[0];
  const Shape& b = inputs[1];
  const bool per_channel = a.rank == 3 && b.rank == 3 && b[0] == a[0] && b[1] == 1 && b[2] == 1;
  if (!(a == b) && !per_channel)
    throw ShapeError("multiply: the second input must have the first's shape or be Cx1x1, got " + a.str() + " and " +
                     b.str());
  elements_ = static_cast<double>(a.elements());
  gate_elements_ = static_cast<double>(b.elements());
  return a;
}

void Multiply::backward(const LayerContext& c) {
  const Tensor none{};
  const bool da = wants_gradient(c, 0), db = wants_gradient(c, 1);
  if (!da && !db) return;
  c.backend->multiply_backward(c.inputs[0], c.inputs[1], c.grad_output, da ? c.grad_inputs[0] : none,
                               da && c.accumulate[0], db ? c.grad_inputs[1] : none, db && c.accumulate[1]);
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
