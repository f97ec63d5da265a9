#pragma once
// Where a layer type writes a layer as ONNX nodes (inference form), without knowing ONNX's files:
// models/detail/onnx implements it over protobuf's graph, and layers/ never depends on ONNX.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/shape.hpp"

namespace cnn {

// One node just added: its attributes, in the order they are set.
class OnnxNode {
 public:
  virtual ~OnnxNode() = default;
  virtual OnnxNode& set_int(const std::string& name, std::int64_t value) = 0;
  virtual OnnxNode& set_ints(const std::string& name, const std::vector<std::int64_t>& values) = 0;
  virtual OnnxNode& set_float(const std::string& name, float value) = 0;
};

// The graph as one layer sees it. Values are ONNX value names; shapes are per sample (the batch
// dimension, symbolic, comes in front).
class OnnxNodes {
 public:
  virtual ~OnnxNodes() = default;

  // The layer's name in the graph, its type word and node id ("conv2d_3"): its nodes, its
  // initializers and its output value are named after it.
  virtual std::string name() const = 0;
  // The value that holds the layer's input `index`, and its shape.
  virtual std::string input(std::size_t index) const = 0;
  virtual Shape input_shape(std::size_t index) const = 0;
  // Parameter `index` (in Layer::parameters() order) as an initializer named
  // name() + "_" + suffix; returns that name.
  virtual std::string parameter(std::size_t index, const std::string& suffix) = 0;

  // The node that computes the layer's output; it is named name(). The returned node is valid
  // until the next node is added.
  virtual OnnxNode& add_output_node(const std::string& op_type, const std::vector<std::string>& inputs) = 0;
  // A node computing a value of the layer's own, `value` (the node takes its name), of `shape`.
  virtual OnnxNode& add_inner_node(const std::string& op_type, const std::vector<std::string>& inputs,
                                   const std::string& value, const Shape& shape) = 0;
  // No node: the layer's output is its input `index` as it is (Dropout in inference).
  virtual void pass_through(std::size_t index) = 0;
};

}  // namespace cnn
