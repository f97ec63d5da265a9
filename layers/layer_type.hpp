#pragma once
// A layer type: everything about a kind of layer that is not running it. Its word in network
// text, the options it takes, how a line of text builds it, how it is written back as text and
// as ONNX nodes. Each layer's file defines its type; layers/registry.cpp lists them, and
// parse_network, network_text and the ONNX export take every word and node from there.
#include <functional>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <typeinfo>

#include "engine/core/layer.hpp"
#include "layers/layer_line.hpp"
#include "layers/onnx_nodes.hpp"

namespace cnn {

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
