// The operators that become activation layers, with the patterns exporters write for SiLU
// (x * Sigmoid(x)), HardSwish (x * HardSigmoid(x)) and GELU (x * 0.5 * (1 + Erf(x / sqrt 2))),
// the joining layers (Add, Mul, Concat), and Add, Sub, Mul and Div of an activation and a constant
// of one value a channel (a scale and shift: TensorFlow's exports write inference BatchNorm and
// input normalisation so).
#include <cfloat>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <cnnengine/layers/builtin_layers.hpp>
#include "models/detail/onnx/onnx_graph_import.hpp"

namespace cnn::onnx_import {
namespace {

bool near(double value, double target) { return std::abs(value - target) <= 1e-6 * std::max(1.0, std::abs(target)); }

// The node reading `value` alone when it is `op` and its other input (of two) is `other`, or a
// constant near `number` where `other` is empty.
const onnx::NodeProto* next_in_chain(GraphImport& g, const std::string& value, const char* op,
                                     const std::string& other, double number = 0) {
  const onnx::NodeProto* n = g.sole_reader(value);
  if (!n || n->op_type() != op || n->input_size() != 2 || n->output_size() != 1) return nullptr;
  const std::string& second = n->input(0) == value ? n->input(1) : n->input(0);
  if (!other.empty()) return second == other ? n : nullptr;
  const Constant* c = g.constant_named(second);
  if (!c || c->elements() != 1) return nullptr;
  return near(c->integer ? static_cast<double>(c->ints[0]) : c->floats[0], number) ? n : nullptr;
}

// A constant's values, one a channel of a [N, channels, H, W] activation it broadcasts over (ONNX's
// broadcasting: dims aligned on the right, every one but the channels' 1), or none where it does
// not broadcast so.
std::optional<std::vector<float>> per_channel(const Constant& c, int channels) {
  if (c.dims.size() > 4) return std::nullopt;
  std::vector<std::int64_t> dims(4 - c.dims.size(), 1);
  dims.insert(dims.end(), c.dims.begin(), c.dims.end());
  if (dims[0] != 1 || dims[2] != 1 || dims[3] != 1 || (dims[1] != 1 && dims[1] != channels)) return std::nullopt;
  std::vector<float> values;
  for (std::size_t i = 0; i < c.elements(); ++i)
    values.push_back(c.integer ? static_cast<float>(c.ints[i]) : c.floats[i]);
  if (values.size() == 1) values.assign(static_cast<std::size_t>(channels), values[0]);
  return values;
}

}  // namespace

// The current node of an activation x and a constant c, on either side (x op c or c op x; Div
// takes only x / c). A scale and shift computes it: y = x * scale[c] + shift[c], a 1x1
// depthwise convolution (trained with the rest in a fine-tuning run, as the BatchNorm it often
// is would be).
void GraphImport::by_constant(const char* what) {
  const int x_index = input_is_constant(0) ? 1 : 0, c_index = 1 - x_index;
  const int x = activation(x_index);
  const Shape in = shape_of(x);
  const Constant& c = constant(c_index);
  const std::string op = node().op_type();
  if (in.rank != 3)
    refuse(std::string("it ") + what + " a " + in.str() + " activation and a constant: only C x H x W maps are " +
           "scaled or shifted by one a channel");
  const std::optional<std::vector<float>> values = per_channel(c, in[0]);
  if (!values)
    refuse(std::string("it ") + what + " a " + in.str() + " activation and a constant " + c.dims_text() +
           ": cnnengine scales and shifts by one value, or one a channel ([C, 1, 1])");
  for (float v : *values)
    if (!std::isfinite(v) || (op == "Div" && v == 0)) refuse("its constant holds a value that is not a finite " +
                                                              std::string(op == "Div" ? "non-zero number" : "number"));
  const auto channels = static_cast<std::size_t>(in[0]);
  std::vector<float> scale(channels, 1.0f), shift(channels, 0.0f);
  for (std::size_t i = 0; i < channels; ++i) {
    const float v = (*values)[i];
    if (op == "Mul") scale[i] = v;
    else if (op == "Add") shift[i] = v;
    else if (op == "Sub" && x_index == 0) shift[i] = -v;
    else if (op == "Sub") scale[i] = -1.0f, shift[i] = v;
    else scale[i] = 1.0f / v;  // Div: div() took a constant over an activation out
  }
  add_layer(layers::depthwise_conv2d(1), {x}, {{"weight", std::move(scale)}, {"bias", std::move(shift)}});
}

void GraphImport::activation_op() {
  const std::string& op = node().op_type();
  expect_attributes(op == "LeakyRelu" ? std::set<std::string>{"alpha"} : std::set<std::string>{});
  const int x = activation(0);
  if (op == "Relu") add_layer(layers::relu(), {x});
  else if (op == "LeakyRelu") add_layer(layers::leaky_relu(float_attribute("alpha", 0.01f)), {x});
  else if (op == "Tanh") add_layer(layers::tanh(), {x});
  else add_layer(layers::hardswish(), {x});
}

// The gate's activation of x, or `gated` (x times it) where a Mul of x alone reads the gate.
void GraphImport::gate(std::unique_ptr<Layer> alone, std::unique_ptr<Layer> gated) {
  const int x = activation(0);
  if (const onnx::NodeProto* mul = next_in_chain(*this, output_name(), "Mul", node().input(0))) {
    take(*mul, add_layer(std::move(gated), {x}, {}, -1));
    return;
  }
  add_layer(std::move(alone), {x});
}

// Sigmoid, or SiLU where a Mul of its input alone reads it.
void GraphImport::sigmoid() {
  expect_attributes({});
  gate(layers::sigmoid(), layers::silu());
}

// HardSigmoid of PyTorch's definition (alpha 1/6, beta 1/2), or HardSwish where a Mul of its
// input alone reads it.
void GraphImport::hard_sigmoid() {
  expect_attributes({"alpha", "beta"});
  const float alpha = float_attribute("alpha", 0.2f), beta = float_attribute("beta", 0.5f);
  if (!near(alpha, 1.0 / 6) || !near(beta, 0.5))
    refuse("its alpha " + std::to_string(alpha) + " and beta " + std::to_string(beta) +
           " are not PyTorch's (1/6 and 1/2), the only hardsigmoid cnnengine computes");
  gate(layers::hardsigmoid(), layers::hardswish());
}

// Clip to [0, 6] is ReLU6, to [0, inf) ReLU.
void GraphImport::clip() {
  expect_attributes({});
  const int x = activation(0);
  const double low = has_input(1) ? scalar(1) : -INFINITY, high = has_input(2) ? scalar(2) : INFINITY;
  if (low == 0 && high == 6) add_layer(layers::relu6(), {x});
  else if (low == 0 && high >= FLT_MAX) add_layer(layers::relu(), {x});
  else
    refuse("it clips to [" + std::to_string(low) + ", " + std::to_string(high) +
           "]: the import reads Clip to [0, 6] (ReLU6) and to [0, inf) (ReLU)");
}

// GELU as the exporters write it: Div(x, sqrt 2) or Mul(x, 1 / sqrt 2), Erf, Add 1, Mul by x,
// Mul by 0.5. Returns false where the chain from the current node is not that.
bool GraphImport::gelu_pattern(int x) {
  const std::string& input = node().input(0);
  const onnx::NodeProto* erf = sole_reader(output_name());
  if (!erf || erf->op_type() != "Erf" || erf->output_size() != 1) return false;
  const onnx::NodeProto* plus_one = next_in_chain(*this, erf->output(0), "Add", "", 1.0);
  if (!plus_one) return false;
  const onnx::NodeProto* times_x = next_in_chain(*this, plus_one->output(0), "Mul", input);
  if (!times_x) return false;
  const onnx::NodeProto* half = next_in_chain(*this, times_x->output(0), "Mul", "", 0.5);
  if (!half) return false;
  const int id = add_layer(layers::gelu(), {x}, {}, -1);
  for (const onnx::NodeProto* n : {erf, plus_one, times_x, half}) take(*n, id);
  return true;
}

void GraphImport::div() {
  expect_attributes({});
  if (input_is_constant(0)) refuse("it divides a constant by an activation, which no layer of cnnengine computes");
  if (has_input(1) && input_is_constant(1) && constant(1).elements() == 1 && near(scalar(1), std::sqrt(2.0)) &&
      gelu_pattern(activation(0)))
    return;
  if (input_is_constant(1)) return by_constant("divides");
  refuse("it divides an activation by another, which no layer of cnnengine computes");
}

void GraphImport::sub() {
  expect_attributes({});
  if (input_is_constant(0) || input_is_constant(1)) return by_constant("subtracts");
  refuse("it subtracts an activation from another, which no layer of cnnengine computes");
}

void GraphImport::gelu() {
  expect_attributes({"approximate"});
  if (string_attribute("approximate", "none") != "none")
    refuse("its tanh approximation: cnnengine's gelu is the exact one (approximate='none')");
  add_layer(layers::gelu(), {activation(0)});
}

void GraphImport::add() {
  expect_attributes({});
  if (input_is_constant(0) || input_is_constant(1)) return by_constant("adds");
  const int a = activation(0), b = activation(1);
  if (!(shape_of(a) == shape_of(b)))
    refuse("it adds a " + shape_of(a).str() + " and a " + shape_of(b).str() +
           " activation: cnnengine's add takes two of one shape");
  add_layer(layers::add(), {a, b});
}

// Mul of two activations (the second of the first's shape or one value a channel: a gate), or
// the start of GELU's pattern (x * 1 / sqrt 2).
void GraphImport::mul() {
  expect_attributes({});
  if (input_is_constant(0) || input_is_constant(1)) {
    const int c = input_is_constant(1) ? 1 : 0;
    if (c == 1 && constant(1).elements() == 1 && near(scalar(1), std::sqrt(0.5)) && gelu_pattern(activation(0))) return;
    return by_constant("multiplies");
  }
  int a = activation(0), b = activation(1);
  const auto is_gate = [&](const Shape& s, const Shape& of) { return s.rank == 3 && s[0] == of[0] && s[1] == 1 && s[2] == 1; };
  if (!(shape_of(a) == shape_of(b)) && is_gate(shape_of(a), shape_of(b))) std::swap(a, b);
  if (!(shape_of(a) == shape_of(b)) && !is_gate(shape_of(b), shape_of(a)))
    refuse("it multiplies a " + shape_of(a).str() + " and a " + shape_of(b).str() +
           " activation: cnnengine's multiply takes two of one shape, or a map and one factor a channel");
  add_layer(layers::multiply(), {a, b});
}

void GraphImport::concat() {
  expect_attributes({"axis"});
  std::vector<int> inputs;
  for (int i = 0; i < node().input_size(); ++i) inputs.push_back(activation(i));
  if (inputs.empty()) refuse("it has no inputs");
  const std::int64_t axis = int_attribute("axis", 1);
  for (int x : inputs)
    if (shape_of(x).rank != 3 || (axis != 1 && axis != -3))
      refuse("it joins along axis " + std::to_string(axis) + " of " + shape_of(x).str() +
             " activations: cnnengine's concat joins C x H x W maps along their channels (axis 1)");
  if (inputs.size() == 1) {
    alias(inputs[0]);
    return;
  }
  add_layer(layers::concat(), inputs);
}

}  // namespace cnn::onnx_import
