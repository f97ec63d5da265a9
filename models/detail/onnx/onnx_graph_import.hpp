#pragma once
// An ONNX graph read into a Network: one pass over the nodes in their (topological) order, each
// value becoming an activation (a node of the network) or a constant, each operator a layer
// (onnx_import_layers.cpp) or a constant folded at import (onnx_import_constants.cpp). The
// patterns an exporter writes for one layer (SiLU's Sigmoid and Mul, GELU's five nodes, a
// GroupNorm's reshapes around InstanceNormalization, MatMul then Add) are found from their first
// node, whose handler takes the rest of the chain where each link has no other reader.
#include <onnx/onnx_pb.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <cnnengine/engine/core/layer.hpp>
#include <cnnengine/engine/core/network.hpp>
#include "models/detail/onnx/onnx_tensors.hpp"

namespace cnn::onnx_import {

// A layer's parameters as the file gives them, by name ("weight", "running_mean"), each checked
// against the layer's own shapes when it is added.
using LayerParameters = std::vector<std::pair<std::string, std::vector<float>>>;

struct GraphResult {
  Network network;
  std::vector<LayerParameters> parameters;  // one per network node
  std::vector<std::string> notes;
};

class GraphImport {
 public:
  // `input` is the image input's value name and per-sample shape; `batch_is_one` where the file
  // fixes the batch at 1 (a Reshape to [1, -1] then keeps the batch). The initializers' bytes
  // are given back from `graph` as they are read: a model is held once, not twice.
  GraphImport(onnx::GraphProto& graph, int opset, std::string input, const Shape& input_shape, bool batch_is_one);

  // Reads the nodes the graph's first output depends on. Throws ConfigError naming the node at
  // fault.
  GraphResult run();

  // ---- For the operators' handlers: the node being read.
  using Handler = void (GraphImport::*)();

  const onnx::NodeProto& node() const { return *node_; }
  int opset() const { return opset_; }
  [[noreturn]] void refuse(const std::string& why) const;
  // Refuses an attribute the handler does not know (it could change the result).
  void expect_attributes(const std::set<std::string>& known) const;

  bool has_input(int index) const;
  bool input_is_constant(int index) const;
  // Input `index` as an activation (the network node computing it) or a constant; refuses
  // otherwise, saying what it is.
  int activation(int index) const;
  const Constant& constant(int index) const;
  // A float constant's values; refuses an integer one.
  const std::vector<float>& floats(int index) const;
  // A float constant's values for a layer's parameter: moved out where this node alone reads the
  // value (an initializer's floats are then held once), copied otherwise.
  std::vector<float> parameter_values(int index);
  // A constant holding one value (any shape of one element).
  double scalar(int index) const;
  const Shape& shape_of(int node_id) const { return network_.node(node_id).shape; }

  std::int64_t int_attribute(const std::string& name, std::int64_t fallback) const;
  float float_attribute(const std::string& name, float fallback) const;
  std::string string_attribute(const std::string& name, const std::string& fallback) const;
  std::vector<std::int64_t> ints_attribute(const std::string& name, std::vector<std::int64_t> fallback) const;
  const onnx::AttributeProto* attribute(const std::string& name) const;

  // The node's output `index` is a new layer reading `inputs`, with its parameters; returns its
  // node id. A ShapeError of the network is refused with its message.
  int add_layer(std::unique_ptr<Layer> layer, std::vector<int> inputs, LayerParameters parameters = {},
                int output = 0);
  // The node's output `index` is the activation `node_id` as it is (Identity, Dropout in
  // inference, a Cast) or a constant.
  void alias(int node_id, int output = 0);
  void set_constant(Constant value, int output = 0);
  // Output `index` of the node already read (its name: "" where the node leaves it out).
  const std::string& output_name(int output = 0) const;
  bool output_read(int output) const;

  // ---- Patterns: the chain's later nodes.
  // The one node that reads `value`, when exactly one does and the value is not a graph output.
  const onnx::NodeProto* sole_reader(const std::string& value) const;
  // Whether `node`'s input `index` names the same value as `value`.
  static bool reads(const onnx::NodeProto& node, int index, const std::string& value);
  // The constant `name` holds, or null. A value not computed yet is folded now where the nodes
  // that compute it read constants only (a pattern's later weights: our export reshapes
  // GroupNorm's gamma after the nodes that normalise).
  const Constant* constant_named(const std::string& name, int depth = 0);
  // `later` was read as part of the current node's pattern: its first output is `node_id`'s
  // value, and it is not read again.
  void take(const onnx::NodeProto& later, int node_id);
  void note(std::string text) { notes_.push_back(std::move(text)); }

 private:
  struct Value {
    int node = -1;  // an activation
    std::optional<Constant> constant;
  };
  const Value& input_value(int index) const;
  void set(const std::string& name, Value value);
  void read(const onnx::NodeProto& node);
  std::set<const onnx::NodeProto*> needed(const std::string& output) const;
  std::string describe(const std::string& value) const;
  static const std::map<std::string, Handler>& handlers();

  // The handlers, one per operator (onnx_import_layers.cpp, onnx_import_constants.cpp).
  void conv();
  void conv_transpose();
  void batch_normalization();
  void activation_op();
  void sigmoid();
  void hard_sigmoid();
  void clip();
  void div();
  void sub();
  void gelu();
  void add();
  void mul();
  void concat();
  void pool();
  void global_pool();
  void reduce_mean();
  void flatten();
  void reshape();
  void squeeze();
  void gemm();
  void matmul();
  void dropout();
  void identity();
  void resize();
  void pad();
  void instance_normalization();
  void group_normalization();
  void softmax();
  void constant_op();
  void shape();

  // Add, Sub, Mul or Div of an activation and a constant of one value a channel (`what`: "adds"...).
  void by_constant(const char* what);
  // The gate's layer `alone` over the current node's input x, or `gated` (x * gate(x)) where a
  // Mul of x alone reads the gate (SiLU, HardSwish).
  void gate(std::unique_ptr<Layer> alone, std::unique_ptr<Layer> gated);
  // GELU's chain from the current node (its first link) over the activation x; false where the
  // nodes after it are not that chain.
  bool gelu_pattern(int x);
  // A GroupNorm's chain from the current Reshape of x to `groups` groups; false where it is not.
  bool group_norm_pattern(int x, int groups);
  // Folds an operator whose inputs are all constants; false where it is not one the import folds.
  bool fold_constants();

  const onnx::GraphProto& graph_;
  int opset_;
  bool batch_is_one_;
  Network network_;
  std::vector<LayerParameters> parameters_;
  std::vector<std::string> notes_;
  std::map<std::string, Value> values_;
  std::map<std::string, std::vector<const onnx::NodeProto*>> readers_;
  std::map<std::string, const onnx::NodeProto*> producers_;
  std::set<std::string> graph_outputs_;
  std::set<const onnx::NodeProto*> taken_;
  const onnx::NodeProto* node_ = nullptr;
};

}  // namespace cnn::onnx_import
