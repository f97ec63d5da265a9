#pragma once
// The layer types that network text (parse_network, network_text) and the ONNX export know: the
// built-in ones, listed in layers/registry.cpp, then any registered with register_layer_type.
#include <string>
#include <vector>

#include "engine/core/layer.hpp"
#include "layers/layer_type.hpp"

namespace cnn {

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
