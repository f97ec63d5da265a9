#pragma once
// What a layer type is, and the table of them. A layer type is everything about a kind of layer
// that is not running it: its word in network text, the options it takes, how a line of text
// builds it (LayerLine), how it is written back as text and as ONNX nodes (OnnxNodes). Each
// layer's file defines its type; layers/registry.cpp lists the built-in ones, then come any
// registered with register_layer_type. parse_network, network_text and the ONNX export take every
// word and node from here.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <typeinfo>
#include <vector>

#include <cnnengine/engine/core/layer.hpp>
#include <cnnengine/engine/core/tensor.hpp>

namespace cnn {

// ---- ONNX nodes: how a layer type writes a layer (inference form) without knowing ONNX's files.
// models/detail/onnx implements them over protobuf's graph, so layers/ never depends on ONNX.

// One node just added: its attributes, in the order they are set.
class OnnxNode {
 public:
  virtual ~OnnxNode() = default;
  virtual OnnxNode& set_int(const std::string& name, std::int64_t value) = 0;
  virtual OnnxNode& set_ints(const std::string& name, const std::vector<std::int64_t>& values) = 0;
  virtual OnnxNode& set_float(const std::string& name, float value) = 0;
  virtual OnnxNode& set_string(const std::string& name, const std::string& value) = 0;
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
  // A constant initializer named name() + "_" + suffix, of dims `dims` (no batch dimension:
  // ONNX's own shape), holding floats or 64-bit integers (Reshape's shape, Resize's scales);
  // returns its name.
  virtual std::string float_constant(const std::string& suffix, const std::vector<float>& values,
                                     const std::vector<std::int64_t>& dims) = 0;
  virtual std::string int_constant(const std::string& suffix, const std::vector<std::int64_t>& values,
                                   const std::vector<std::int64_t>& dims) = 0;
};

// ---- Network text: one line's arguments and options, read as numbers with the format's
// messages, and floats written so that they read back the same.

struct LayerType;

// One line of network text as a layer type's parser reads it: the positional arguments, the
// key=value options (only those the type accepts, checked before), and the layer's inputs.
// Every accessor throws a ConfigError naming what was wrong; parse_network puts the file and
// line in front.
class LayerLine {
 public:
  // `output_named` finds the output a name refers to (as=, or "input"), and throws when none has
  // it; `previous` is the node the layer reads by default; `inputs` what in= gave (or nothing).
  LayerLine(const LayerType& type, std::vector<std::string> arguments, std::map<std::string, std::string> options,
            std::vector<int> inputs, int previous, std::function<int(const std::string&)> output_named);

  // Throws "expected: <usage>" unless the line has `count` positional arguments.
  void expect_arguments(std::size_t count) const;
  std::size_t argument_count() const { return arguments_.size(); }
  // key's value as written ("same" in pad=same); `fallback` when the line does not give it.
  std::string text_option(const std::string& key, const std::string& fallback) const;
  const std::string& argument(std::size_t index) const;
  double number(std::size_t index) const;
  int whole_number(std::size_t index) const;

  int whole_option(const std::string& key, int fallback) const;
  float real_option(const std::string& key, float fallback) const;
  // key=0 or key=1.
  bool flag_option(const std::string& key, bool fallback) const;

  // The layer also reads the output that argument `index` names, after its first input (in='s,
  // or the previous line's): add NAME.
  void read_named_output(std::size_t index);
  // The inputs the layer reads; empty: the previous line's output.
  const std::vector<int>& inputs() const { return inputs_; }

 private:
  const LayerType& type_;
  std::vector<std::string> arguments_;
  std::map<std::string, std::string> options_;
  std::vector<int> inputs_;
  int previous_;
  std::function<int(const std::string&)> output_named_;
};

// The shortest text that reads back as the same float ("0.3", not "0.300000012").
std::string exact_text(float value);

// ---- The type, and the table.

struct LayerType {
  // Layer::type_name() of the layers it describes: "conv2d".
  std::string type_name;
  // The class of those layers (typeid(MyLayer)); null: any class whose type_name() is type_name.
  // A layer of one's own that merely takes a built-in's name is then not mistaken for it.
  const std::type_info* layer_class = nullptr;
  // Its word in network text, and how a line of it reads: "conv", "conv OUT KERNEL [stride=S]
  // [pad=P] [bias=0|1]".
  std::string word;
  std::string usage;
  // The key= options it takes besides as= and in= (which every line takes).
  std::set<std::string> options;

  // Builds the layer from its line.
  std::function<std::unique_ptr<Layer>(LayerLine& line)> parse;
  // What follows the word when `layer` is written as text, such that parse builds the same layer
  // again ("16 3 stride=2"); `input_names` are the names its inputs are given in the text. Not
  // set: the word alone.
  std::function<std::string(const Layer& layer, std::span<const std::string> input_names)> text;
  // Writes `layer` in inference form. Not set: ONNX has no operator for it, and the export
  // refuses a network that holds one.
  std::function<void(const Layer& layer, OnnxNodes& graph)> onnx;
};

// Every known type, the built-in ones first. The pointers stay valid for the program's life.
std::vector<const LayerType*> layer_types();

// The type whose network-text word is `word`; null when none is.
const LayerType* layer_type_for_word(const std::string& word);
// The type that describes `layer` (its type_name, and its class where the type names one); null
// for a layer of one's own that was not registered.
const LayerType* layer_type_of(const Layer& layer);

// Makes a layer of one's own known to network text (and to the ONNX export where the type has
// onnx): a saved network that holds it can then be loaded. A ConfigError when the type has no
// word, type name or parse, when its word is not one word, or when either is taken.
void register_layer_type(LayerType type);

// One usage line per known type ("conv OUT KERNEL [stride=S] [pad=P] [bias=0|1]"), in order.
std::vector<std::string> layer_usages();
// The known words, comma-separated: "conv, relu, flatten, ...".
std::string layer_words();

}  // namespace cnn
