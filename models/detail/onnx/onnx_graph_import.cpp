#include "models/detail/onnx/onnx_graph_import.hpp"

#include <algorithm>
#include <cmath>

#include <cnnengine/base/error.hpp>

namespace cnn::onnx_import {
namespace {

// What refuse() throws: a ConfigError that already names the node at fault.
class NodeRefusal final : public ConfigError {
 public:
  using ConfigError::ConfigError;
};

}  // namespace

GraphImport::GraphImport(onnx::GraphProto& graph, int opset, std::string input, const Shape& input_shape,
                         bool batch_is_one)
    : graph_(graph), opset_(opset), batch_is_one_(batch_is_one), network_(input_shape), parameters_(1) {
  for (int i = 0; i < graph.initializer_size(); ++i) {
    onnx::TensorProto& t = *graph.mutable_initializer(i);
    set(t.name(), Value{-1, read_tensor(t, "initializer '" + t.name() + "'")});
    std::string().swap(*t.mutable_raw_data());
  }
  set(input, Value{0, std::nullopt});
  for (const onnx::NodeProto& n : graph.node()) {
    for (const std::string& in : n.input())
      if (!in.empty()) readers_[in].push_back(&n);
    for (const std::string& out : n.output())
      if (!out.empty() && (values_.count(out) || !producers_.emplace(out, &n).second))
        throw ConfigError("node '" + n.name() + "' (" + n.op_type() + ") computes '" + out +
                          "', which another node, an initializer or the input already gives (each value has one "
                          "producer)");
  }
  for (const onnx::ValueInfoProto& out : graph.output()) graph_outputs_.insert(out.name());
}

// The nodes the value `output` depends on: the rest (our export's probabilities, a training
// output) is not read.
std::set<const onnx::NodeProto*> GraphImport::needed(const std::string& output) const {
  std::set<const onnx::NodeProto*> nodes;
  std::vector<std::string> pending{output};
  while (!pending.empty()) {
    const std::string value = pending.back();
    pending.pop_back();
    const auto it = producers_.find(value);
    if (it == producers_.end() || !nodes.insert(it->second).second) continue;
    for (const std::string& in : it->second->input())
      if (!in.empty()) pending.push_back(in);
  }
  return nodes;
}

GraphResult GraphImport::run() {
  const std::string& output = graph_.output(0).name();
  const std::set<const onnx::NodeProto*> nodes = needed(output);
  for (const onnx::NodeProto& n : graph_.node())
    if (nodes.count(&n) && !taken_.count(&n)) read(n);
  node_ = nullptr;
  const auto it = values_.find(output);
  if (it == values_.end())
    throw ConfigError("the graph's output '" + output + "' is computed by no node");
  if (it->second.node < 0) throw ConfigError("the graph's output '" + output + "' is a constant, not computed from the input");
  if (it->second.node == 0) throw ConfigError("the graph's output '" + output + "' is its input: the model has no layers");
  if (it->second.node != network_.last())
    throw std::logic_error("ONNX import: the output is node " + std::to_string(it->second.node) + " of " +
                           std::to_string(network_.last()));
  return GraphResult{std::move(network_), std::move(parameters_), std::move(notes_)};
}

void GraphImport::read(const onnx::NodeProto& n) {
  node_ = &n;
  for (int i = 0; i < n.input_size(); ++i)
    if (!n.input(i).empty() && !values_.count(n.input(i)))
      refuse("its input '" + n.input(i) + "' is computed by no node before it (the graph's nodes must be in order)");
  if (!n.domain().empty() && n.domain() != "ai.onnx")
    refuse("an operator of the domain '" + n.domain() + "', where the import reads ONNX's own operators");
  const auto& table = handlers();
  const auto handler = table.find(n.op_type());
  bool all_constant = n.input_size() > 0;
  for (int i = 0; i < n.input_size(); ++i)
    if (has_input(i) && !input_is_constant(i)) all_constant = false;
  if (all_constant && n.op_type() != "Constant" && fold_constants()) return;
  if (all_constant && handler != table.end())
    refuse("computes a constant with " + n.op_type() + ", which the import does not fold; simplify the model first "
           "(onnxsim, or export with constant folding)");
  if (handler == table.end())
    refuse("no layer of cnnengine computes " + n.op_type() + "; the operators the import reads are listed in "
           "docs/design.md (\"ONNX import\")");
  try {
    (this->*handler->second)();
  } catch (const NodeRefusal&) {
    throw;
  } catch (const ConfigError& e) {
    refuse(e.what());  // a builder's refusal of an argument out of its range names the layer, not the node
  }
}

void GraphImport::refuse(const std::string& why) const {
  if (!node_) throw ConfigError(why);
  throw NodeRefusal("node '" + node_->name() + "' (" + node_->op_type() + "): " + why);
}

void GraphImport::expect_attributes(const std::set<std::string>& known) const {
  for (const onnx::AttributeProto& a : node_->attribute())
    if (!known.count(a.name()))
      refuse("its attribute '" + a.name() + "' is not one the import can express");
}

bool GraphImport::has_input(int index) const { return index < node_->input_size() && !node_->input(index).empty(); }

const GraphImport::Value& GraphImport::input_value(int index) const {
  if (!has_input(index)) refuse("needs an input " + std::to_string(index) + ", and has none");
  return values_.at(node_->input(index));
}

bool GraphImport::input_is_constant(int index) const { return input_value(index).constant.has_value(); }

std::string GraphImport::describe(const std::string& value) const {
  const Value& v = values_.at(value);
  return v.constant ? "a constant " + v.constant->dims_text() : "an activation";
}

int GraphImport::activation(int index) const {
  const Value& v = input_value(index);
  if (v.constant)
    refuse("its input " + std::to_string(index) + " ('" + node_->input(index) + "') is a constant " +
           v.constant->dims_text() + ", where the import takes an activation computed from the image");
  return v.node;
}

const Constant& GraphImport::constant(int index) const {
  const Value& v = input_value(index);
  if (!v.constant)
    refuse("its input " + std::to_string(index) + " ('" + node_->input(index) +
           "') is computed from the image, where the import takes a constant (a weight, a shape): a layer's "
           "weights must be initializers");
  return *v.constant;
}

const std::vector<float>& GraphImport::floats(int index) const {
  const Constant& c = constant(index);
  if (c.integer) refuse("its input " + std::to_string(index) + " holds integers, where floats are expected");
  return c.floats;
}

std::vector<float> GraphImport::parameter_values(int index) {
  const std::vector<float>& values = floats(index);
  const std::string& name = node_->input(index);
  const auto readers = readers_.find(name);
  const bool sole_reader = !graph_outputs_.count(name) && readers != readers_.end() && readers->second.size() == 1 &&
                           std::count(node_->input().begin(), node_->input().end(), name) == 1;
  if (!sole_reader) return values;
  return std::move(values_.at(name).constant->floats);
}

double GraphImport::scalar(int index) const {
  const Constant& c = constant(index);
  if (c.elements() != 1) refuse("its input " + std::to_string(index) + " must hold one value; it is " + c.dims_text());
  return c.integer ? static_cast<double>(c.ints[0]) : c.floats[0];
}

const onnx::AttributeProto* GraphImport::attribute(const std::string& name) const {
  for (const onnx::AttributeProto& a : node_->attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

std::int64_t GraphImport::int_attribute(const std::string& name, std::int64_t fallback) const {
  const onnx::AttributeProto* a = attribute(name);
  if (!a) return fallback;
  if (a->type() != onnx::AttributeProto::INT) refuse("its attribute '" + name + "' is not an integer");
  return a->i();
}

float GraphImport::float_attribute(const std::string& name, float fallback) const {
  const onnx::AttributeProto* a = attribute(name);
  if (!a) return fallback;
  if (a->type() != onnx::AttributeProto::FLOAT) refuse("its attribute '" + name + "' is not a float");
  if (!std::isfinite(a->f())) refuse("its attribute '" + name + "' is not finite");
  return a->f();
}

std::string GraphImport::string_attribute(const std::string& name, const std::string& fallback) const {
  const onnx::AttributeProto* a = attribute(name);
  if (!a) return fallback;
  if (a->type() != onnx::AttributeProto::STRING) refuse("its attribute '" + name + "' is not a string");
  return a->s();
}

std::vector<std::int64_t> GraphImport::ints_attribute(const std::string& name,
                                                      std::vector<std::int64_t> fallback) const {
  const onnx::AttributeProto* a = attribute(name);
  if (!a) return fallback;
  if (a->type() != onnx::AttributeProto::INTS) refuse("its attribute '" + name + "' is not a list of integers");
  return {a->ints().begin(), a->ints().end()};
}

void GraphImport::set(const std::string& name, Value value) {
  if (name.empty()) return;
  if (!values_.emplace(name, std::move(value)).second) {
    if (!node_) throw ConfigError("the value '" + name + "' is given twice (initializers or inputs)");
    refuse("computes '" + name + "', a value already computed (each value has one producer)");
  }
}

const std::string& GraphImport::output_name(int output) const {
  static const std::string none;
  return output < node_->output_size() ? node_->output(output) : none;
}

bool GraphImport::output_read(int output) const {
  const std::string& name = output_name(output);
  return !name.empty() && (readers_.count(name) || graph_outputs_.count(name));
}

int GraphImport::add_layer(std::unique_ptr<Layer> layer, std::vector<int> inputs, LayerParameters parameters,
                           int output) {
  int id = 0;
  try {
    id = network_.add(std::move(layer), std::move(inputs));
  } catch (const ShapeError& e) {
    refuse(e.what());
  }
  const Layer& added = *network_.node(id).layer;
  // The layer's parameters are what the file gives, in its order: by name, with its shapes
  // (checked here: a handler that read a weight of other dims would be a bug, or a corrupt file).
  LayerParameters ordered;
  for (const ParamSpec& spec : added.parameters()) {
    const auto it = std::find_if(parameters.begin(), parameters.end(), [&](const auto& p) { return p.first == spec.name; });
    if (it == parameters.end()) throw std::logic_error("ONNX import: no values for " + spec.name + " of " + added.describe());
    if (it->second.size() != spec.shape.elements())
      refuse("its " + spec.name + " holds " + std::to_string(it->second.size()) + " values where the layer (" +
             added.describe() + ") takes " + spec.shape.str());
    ordered.emplace_back(spec.name, std::move(it->second));
  }
  parameters_.push_back(std::move(ordered));
  if (output >= 0) set(output_name(output), Value{id, std::nullopt});
  return id;
}

void GraphImport::alias(int node_id, int output) { set(output_name(output), Value{node_id, std::nullopt}); }

void GraphImport::set_constant(Constant value, int output) { set(output_name(output), Value{-1, std::move(value)}); }

const onnx::NodeProto* GraphImport::sole_reader(const std::string& value) const {
  if (graph_outputs_.count(value)) return nullptr;
  const auto it = readers_.find(value);
  if (it == readers_.end() || it->second.size() != 1) return nullptr;
  return taken_.count(it->second[0]) ? nullptr : it->second[0];
}

bool GraphImport::reads(const onnx::NodeProto& node, int index, const std::string& value) {
  return index < node.input_size() && node.input(index) == value;
}

const Constant* GraphImport::constant_named(const std::string& name, int depth) {
  const auto it = values_.find(name);
  if (it != values_.end()) return it->second.constant ? &*it->second.constant : nullptr;
  const auto producer = producers_.find(name);
  if (producer == producers_.end() || taken_.count(producer->second) || depth > 16) return nullptr;
  const onnx::NodeProto& n = *producer->second;
  for (const std::string& in : n.input())
    if (!in.empty() && !constant_named(in, depth + 1)) return nullptr;
  const onnx::NodeProto* current = node_;
  node_ = &n;
  bool folded = true;
  if (n.op_type() == "Constant") constant_op();
  else folded = n.input_size() > 0 && fold_constants();
  node_ = current;
  if (!folded) return nullptr;
  taken_.insert(&n);
  return constant_named(name, depth + 1);
}

void GraphImport::take(const onnx::NodeProto& later, int node_id) {
  taken_.insert(&later);
  for (int i = 1; i < later.output_size(); ++i)
    if (!later.output(i).empty() && (readers_.count(later.output(i)) || graph_outputs_.count(later.output(i))))
      refuse("its pattern's node '" + later.name() + "' has a second output that is read");
  if (later.output_size() > 0) set(later.output(0), Value{node_id, std::nullopt});
}

const std::map<std::string, GraphImport::Handler>& GraphImport::handlers() {
  static const std::map<std::string, Handler> table{
      {"Conv", &GraphImport::conv},
      {"ConvTranspose", &GraphImport::conv_transpose},
      {"BatchNormalization", &GraphImport::batch_normalization},
      {"Relu", &GraphImport::activation_op},
      {"LeakyRelu", &GraphImport::activation_op},
      {"Tanh", &GraphImport::activation_op},
      {"HardSwish", &GraphImport::activation_op},
      {"Sigmoid", &GraphImport::sigmoid},
      {"HardSigmoid", &GraphImport::hard_sigmoid},
      {"Clip", &GraphImport::clip},
      {"Div", &GraphImport::div},
      {"Sub", &GraphImport::sub},
      {"Gelu", &GraphImport::gelu},
      {"Add", &GraphImport::add},
      {"Mul", &GraphImport::mul},
      {"Concat", &GraphImport::concat},
      {"MaxPool", &GraphImport::pool},
      {"AveragePool", &GraphImport::pool},
      {"GlobalAveragePool", &GraphImport::global_pool},
      {"GlobalMaxPool", &GraphImport::global_pool},
      {"ReduceMean", &GraphImport::reduce_mean},
      {"Flatten", &GraphImport::flatten},
      {"Reshape", &GraphImport::reshape},
      {"Squeeze", &GraphImport::squeeze},
      {"Gemm", &GraphImport::gemm},
      {"MatMul", &GraphImport::matmul},
      {"Dropout", &GraphImport::dropout},
      {"Identity", &GraphImport::identity},
      {"Cast", &GraphImport::identity},
      {"Resize", &GraphImport::resize},
      {"Pad", &GraphImport::pad},
      {"InstanceNormalization", &GraphImport::instance_normalization},
      {"GroupNormalization", &GraphImport::group_normalization},
      {"Softmax", &GraphImport::softmax},
      {"Constant", &GraphImport::constant_op},
      {"Shape", &GraphImport::shape},
  };
  return table;
}

}  // namespace cnn::onnx_import
