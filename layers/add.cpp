// Add's type: "add NAME" reads the named output besides the previous line's.
#include "layers/add.hpp"

#include <cnnengine/layers/builtin_layers.hpp>
#include <cnnengine/layers/registry.hpp>

namespace cnn {

LayerType add_type() {
  LayerType type;
  type.type_name = "add";
  type.layer_class = &typeid(Add);
  type.word = "add";
  type.usage = "add NAME";
  type.parse = [](LayerLine& line) {
    line.expect_arguments(1);
    line.read_named_output(0);
    return std::make_unique<Add>();
  };
  type.text = [](const Layer&, std::span<const std::string> input_names) { return input_names[1]; };
  type.onnx = [](const Layer&, OnnxNodes& graph) { graph.add_output_node("Add", {graph.input(0), graph.input(1)}); };
  return type;
}

std::unique_ptr<Layer> layers::add() { return std::make_unique<Add>(); }

}  // namespace cnn
