// network_text: the inverse of parse_network, for the file a checkpoint holds. Each layer's
// words come from its type (layers/registry.hpp).
#include <set>
#include <sstream>
#include <vector>

#include <cnnengine/base/error.hpp>
#include <cnnengine/layers/registry.hpp>
#include <cnnengine/models/network_text.hpp>

namespace cnn {
namespace {

std::string name_of(int id) { return id == 0 ? "input" : "n" + std::to_string(id); }

// The layer's word and arguments, without as= and in=.
std::string layer_words(const Node& node) {
  const Layer& layer = *node.layer;
  const LayerType* type = layer_type_of(layer);
  if (!type)
    throw ConfigError("layer " + node.name + " (" + layer.describe() +
                      ") has no text form: only the built-in layers and those given to register_layer_type can be "
                      "saved");
  if (!type->text) return type->word;
  std::vector<std::string> input_names;
  for (int in : node.inputs) input_names.push_back(name_of(in));
  const std::string arguments = type->text(layer, input_names);
  return arguments.empty() ? type->word : type->word + " " + arguments;
}

}  // namespace

std::string network_text(const Network& network) {
  // Outputs read by another than the next line are named after their node.
  std::set<int> named;
  for (int id = 1; id < network.size(); ++id) {
    const Node& node = network.node(id);
    for (std::size_t k = 0; k < node.inputs.size(); ++k)
      if (node.inputs[k] != id - 1 || k > 0) named.insert(node.inputs[k]);
  }
  std::ostringstream text;
  for (int id = 1; id < network.size(); ++id) {
    const Node& node = network.node(id);
    text << layer_words(node);
    if (node.inputs[0] != id - 1) text << " in=" << name_of(node.inputs[0]);
    if (named.count(id)) text << " as=" << name_of(id);
    text << "\n";
  }
  return text.str();
}

}  // namespace cnn
