// The activations besides ReLU: the layer, its eight types (network-text words and ONNX nodes)
// and the factories of layers/builtin_layers.hpp.
#include <cnnengine/engine/core/backend.hpp>
#include "layers/activation.hpp"

#include <cmath>

#include <cnnengine/base/error.hpp>
#include <cnnengine/layers/builtin_layers.hpp>
#include <cnnengine/layers/registry.hpp>

namespace cnn {
namespace {

std::unique_ptr<Layer> make(Activation kind, float slope = 0.01f) {
  return std::make_unique<ActivationLayer>(ActivationDesc{kind, slope});
}

}  // namespace

ActivationLayer::ActivationLayer(ActivationDesc desc) : desc_(desc) {
  if (desc.kind == Activation::leaky_relu && !std::isfinite(desc.slope))
    throw ConfigError("leaky_relu: the slope must be a finite number, not " + std::to_string(desc.slope));
}

std::string ActivationLayer::type_name() const { return to_string(desc_.kind); }

std::string ActivationLayer::describe() const {
  return desc_.kind == Activation::leaky_relu ? "leaky_relu slope=" + exact_text(desc_.slope) : type_name();
}

// Only relu6 swaps with max pooling exactly: it is the identity between its two flat parts, so two
// inputs give one output only where the derivative is 0. A leaky ReLU is strictly increasing, but
// slope * x rounds distinct negative inputs to one output, and max pooling then sends the
// gradient to another input than after the swap; the smooth ones round alike (sigmoid(x) is 0.5
// for every tiny x) or are not monotonic (silu, gelu, hardswish).
bool ActivationLayer::commutes_with_max_pooling() const { return desc_.kind == Activation::relu6; }

LayerCost ActivationLayer::forward_cost() const {
  double flops = 1;  // per element, an estimate: an exp or erf as some 20 operations
  switch (desc_.kind) {
    case Activation::leaky_relu: flops = 2; break;
    case Activation::relu6: flops = 2; break;
    case Activation::hardsigmoid: flops = 4; break;
    case Activation::hardswish: flops = 5; break;
    case Activation::sigmoid: flops = 20; break;
    case Activation::tanh: flops = 22; break;
    case Activation::silu: flops = 21; break;
    case Activation::gelu: flops = 25; break;
  }
  return {flops * elements_, 2 * sizeof(float) * elements_};
}

void ActivationLayer::backward(const LayerContext& c) {
  if (!wants_gradient(c, 0)) return;
  const bool from_output = derivative_from_output(desc_);
  c.backend->activation_backward(desc_, from_output ? Tensor{} : c.inputs[0], from_output ? c.output : Tensor{},
                                 c.grad_output, c.grad_inputs[0], c.accumulate[0]);
}

namespace {

LayerType activation_type(Activation kind, const char* word) {
  LayerType type;
  type.type_name = to_string(kind);
  type.layer_class = &typeid(ActivationLayer);
  type.word = type.usage = word;
  type.parse = [kind](LayerLine& line) {
    line.expect_arguments(0);
    return make(kind);
  };
  return type;
}

// y = op(x), one node.
LayerType single_node_type(Activation kind, const char* word, const char* op) {
  LayerType type = activation_type(kind, word);
  const std::string op_type = op;
  type.onnx = [op_type](const Layer&, OnnxNodes& graph) { graph.add_output_node(op_type, {graph.input(0)}); };
  return type;
}

// PyTorch's hardsigmoid, relu6(x + 3) / 6, is ONNX's HardSigmoid with these (ONNX's own default
// alpha is 0.2).
OnnxNode& hard_sigmoid_node(OnnxNode& node) { return node.set_float("alpha", 1.f / 6.f).set_float("beta", 0.5f); }

}  // namespace

LayerType leaky_relu_type() {
  LayerType type = activation_type(Activation::leaky_relu, "leakyrelu");
  type.usage = "leakyrelu [slope=A]";
  type.options = {"slope"};
  type.parse = [](LayerLine& line) {
    line.expect_arguments(0);
    return make(Activation::leaky_relu, line.real_option("slope", 0.01f));
  };
  type.text = [](const Layer& layer, std::span<const std::string>) -> std::string {
    const float slope = static_cast<const ActivationLayer&>(layer).desc().slope;
    return slope == 0.01f ? "" : "slope=" + exact_text(slope);
  };
  type.onnx = [](const Layer& layer, OnnxNodes& graph) {
    graph.add_output_node("LeakyRelu", {graph.input(0)})
        .set_float("alpha", static_cast<const ActivationLayer&>(layer).desc().slope);
  };
  return type;
}

LayerType relu6_type() {
  LayerType type = activation_type(Activation::relu6, "relu6");
  // Opset 13's Clip takes its bounds as inputs.
  type.onnx = [](const Layer&, OnnxNodes& graph) {
    const std::string low = graph.float_constant("min", {0.f}, {});
    const std::string high = graph.float_constant("max", {6.f}, {});
    graph.add_output_node("Clip", {graph.input(0), low, high});
  };
  return type;
}

LayerType sigmoid_type() { return single_node_type(Activation::sigmoid, "sigmoid", "Sigmoid"); }
LayerType tanh_type() { return single_node_type(Activation::tanh, "tanh", "Tanh"); }

LayerType silu_type() {
  LayerType type = activation_type(Activation::silu, "silu");
  type.onnx = [](const Layer&, OnnxNodes& graph) {
    const std::string x = graph.input(0);
    const std::string sigmoid = graph.name() + "_sigmoid";
    graph.add_inner_node("Sigmoid", {x}, sigmoid, graph.input_shape(0));
    graph.add_output_node("Mul", {x, sigmoid});
  };
  return type;
}

// x (1 + erf(x / sqrt 2)) / 2, as PyTorch exports the exact GELU before opset 20.
LayerType gelu_type() {
  LayerType type = activation_type(Activation::gelu, "gelu");
  type.onnx = [](const Layer&, OnnxNodes& graph) {
    const std::string x = graph.input(0);
    const std::string name = graph.name();
    const Shape shape = graph.input_shape(0);
    const std::string sqrt2 = graph.float_constant("sqrt2", {1.41421356237309505f}, {});
    const std::string one = graph.float_constant("one", {1.f}, {});
    const std::string half = graph.float_constant("half", {0.5f}, {});
    graph.add_inner_node("Div", {x, sqrt2}, name + "_scaled", shape);
    graph.add_inner_node("Erf", {name + "_scaled"}, name + "_erf", shape);
    graph.add_inner_node("Add", {name + "_erf", one}, name + "_cdf2", shape);
    graph.add_inner_node("Mul", {x, name + "_cdf2"}, name + "_twice", shape);
    graph.add_output_node("Mul", {name + "_twice", half});
  };
  return type;
}

// ONNX's HardSwish needs opset 14: x times HardSigmoid.
LayerType hardswish_type() {
  LayerType type = activation_type(Activation::hardswish, "hardswish");
  type.onnx = [](const Layer&, OnnxNodes& graph) {
    const std::string x = graph.input(0);
    const std::string gate = graph.name() + "_hardsigmoid";
    hard_sigmoid_node(graph.add_inner_node("HardSigmoid", {x}, gate, graph.input_shape(0)));
    graph.add_output_node("Mul", {x, gate});
  };
  return type;
}

LayerType hardsigmoid_type() {
  LayerType type = activation_type(Activation::hardsigmoid, "hardsigmoid");
  type.onnx = [](const Layer&, OnnxNodes& graph) {
    hard_sigmoid_node(graph.add_output_node("HardSigmoid", {graph.input(0)}));
  };
  return type;
}

std::unique_ptr<Layer> layers::leaky_relu(float slope) { return make(Activation::leaky_relu, slope); }
std::unique_ptr<Layer> layers::relu6() { return make(Activation::relu6); }
std::unique_ptr<Layer> layers::sigmoid() { return make(Activation::sigmoid); }
std::unique_ptr<Layer> layers::tanh() { return make(Activation::tanh); }
std::unique_ptr<Layer> layers::silu() { return make(Activation::silu); }
std::unique_ptr<Layer> layers::gelu() { return make(Activation::gelu); }
std::unique_ptr<Layer> layers::hardswish() { return make(Activation::hardswish); }
std::unique_ptr<Layer> layers::hardsigmoid() { return make(Activation::hardsigmoid); }

}  // namespace cnn
