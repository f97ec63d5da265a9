#pragma once
// A layer type: everything about a kind of layer that is not running it. Its word in network
// text, the options it takes, how a line of text builds it, how it is written back as text and
// as ONNX nodes. Each layer's file defines its type; layers/registry.cpp lists them, and
// parse_network, network_text and the ONNX export take every word and node from there.
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <typeinfo>
#include <vector>

#include "engine/core/layer.hpp"
#include "layers/onnx_nodes.hpp"

namespace cnn {

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

struct LayerType {
  // Layer::type_name() of the layers it describes: "conv2d".
  std::string type_name;
  // The class of those layers (typeid(Conv2D)); null: any class whose type_name() is type_name.
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

}  // namespace cnn
