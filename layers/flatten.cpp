// Flatten's type: its network-text word and its ONNX node.
#include "layers/flatten.hpp"

#include <cnnengine/layers/builtin_layers.hpp>
#include <cnnengine/layers/registry.hpp>

namespace cnn {

LayerType flatten_type() {
  LayerType type;
  type.type_name = "flatten";
  type.layer_class = &typeid(Flatten);
  type.word = type.usage = "flatten";
  type.parse = [](LayerLine& line) {
    line.expect_arguments(0);
    return std::make_unique<Flatten>();
  };
  type.onnx = [](const Layer&, OnnxNodes& graph) {
    if (graph.input_shape(0).rank == 1) return graph.pass_through(0);
    graph.add_output_node("Flatten", {graph.input(0)}).set_int("axis", 1);
  };
  return type;
}

std::unique_ptr<Layer> layers::flatten() { return std::make_unique<Flatten>(); }

}  // namespace cnn
