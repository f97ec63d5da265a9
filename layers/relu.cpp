// ReLU's type: its network-text word and its ONNX node.
#include "layers/relu.hpp"

#include <cnnengine/layers/builtin_layers.hpp>
#include <cnnengine/layers/registry.hpp>

namespace cnn {

LayerType relu_type() {
  LayerType type;
  type.type_name = "relu";
  type.layer_class = &typeid(ReLU);
  type.word = type.usage = "relu";
  type.parse = [](LayerLine& line) {
    line.expect_arguments(0);
    return std::make_unique<ReLU>();
  };
  type.onnx = [](const Layer&, OnnxNodes& graph) { graph.add_output_node("Relu", {graph.input(0)}); };
  return type;
}

std::unique_ptr<Layer> layers::relu() { return std::make_unique<ReLU>(); }

}  // namespace cnn
