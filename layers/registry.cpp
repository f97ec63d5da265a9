// The built-in layer types, and the registry that holds them with those of one's own.
#include <cnnengine/layers/registry.hpp>

#include <deque>
#include <mutex>

#include <cnnengine/base/error.hpp>
#include "layers/activation.hpp"
#include "layers/add.hpp"
#include "layers/batchnorm2d.hpp"
#include "layers/concat.hpp"
#include "layers/conv2d.hpp"
#include "layers/conv_transpose2d.hpp"
#include "layers/dense.hpp"
#include "layers/dropout.hpp"
#include "layers/flatten.hpp"
#include "layers/group_norm.hpp"
#include "layers/multiply.hpp"
#include "layers/pad.hpp"
#include "layers/pool2d.hpp"
#include "layers/relu.hpp"
#include "layers/upsample.hpp"

namespace cnn {
namespace {

// Every built-in layer, one line each, in the order usage lists them. A new layer's type is
// defined in its own file (layers/relu.cpp shows the least there is to it) and listed here.
std::vector<LayerType> builtin_layer_types() {
  return {
      conv2d_type(),
      depthwise_conv2d_type(),
      conv_transpose2d_type(),
      relu_type(),
      leaky_relu_type(),
      relu6_type(),
      sigmoid_type(),
      tanh_type(),
      silu_type(),
      gelu_type(),
      hardswish_type(),
      hardsigmoid_type(),
      flatten_type(),
      max_pool2d_type(),
      average_pool2d_type(),
      global_average_pool_type(),
      global_max_pool_type(),
      upsample_type(),
      pad_type(),
      batchnorm2d_type(),
      group_norm_type(),
      layer_norm_type(),
      dropout_type(),
      dense_type(),
      add_type(),
      concat_type(),
      multiply_type(),
  };
}

bool is_one_word(const std::string& word) {
  if (word.empty()) return false;
  for (char c : word)
    if (c == '=' || c == '#' || static_cast<unsigned char>(c) <= ' ') return false;
  return true;
}

class Registry {
 public:
  Registry() {
    for (LayerType& type : builtin_layer_types()) add(std::move(type));
  }

  void add(LayerType type) {
    const std::lock_guard lock(mutex_);
    if (!is_one_word(type.word))
      throw ConfigError("register_layer_type: the word '" + type.word + "' is not one word without '=' or '#'");
    if (type.type_name.empty()) throw ConfigError("register_layer_type: " + type.word + " has no type name");
    if (!type.parse) throw ConfigError("register_layer_type: " + type.word + " has no parse");
    for (const LayerType& known : types_) {
      if (known.word == type.word) throw ConfigError("register_layer_type: the word '" + type.word + "' is taken");
      if (known.type_name == type.type_name)
        throw ConfigError("register_layer_type: the type name '" + type.type_name + "' is taken (by " + known.word +
                          ")");
    }
    for (const std::string& key : type.options)
      if (key == "as" || key == "in" || !is_one_word(key))
        throw ConfigError("register_layer_type: " + type.word + " cannot take the option '" + key + "='");
    if (type.usage.empty()) type.usage = type.word;
    types_.push_back(std::move(type));
  }

  std::vector<const LayerType*> all() const {
    const std::lock_guard lock(mutex_);
    std::vector<const LayerType*> types;
    for (const LayerType& type : types_) types.push_back(&type);
    return types;
  }

 private:
  mutable std::mutex mutex_;
  std::deque<LayerType> types_;  // a deque: pointers to its elements stay valid as it grows
};

Registry& registry() {
  static Registry instance;
  return instance;
}

}  // namespace

std::vector<const LayerType*> layer_types() { return registry().all(); }

const LayerType* layer_type_for_word(const std::string& word) {
  for (const LayerType* type : layer_types())
    if (type->word == word) return type;
  return nullptr;
}

const LayerType* layer_type_of(const Layer& layer) {
  const std::string name = layer.type_name();
  for (const LayerType* type : layer_types())
    if (type->type_name == name && (!type->layer_class || *type->layer_class == typeid(layer))) return type;
  return nullptr;
}

void register_layer_type(LayerType type) { registry().add(std::move(type)); }

std::vector<std::string> layer_usages() {
  std::vector<std::string> usages;
  for (const LayerType* type : layer_types()) usages.push_back(type->usage);
  return usages;
}

std::string layer_words() {
  std::string words;
  for (const LayerType* type : layer_types()) words += (words.empty() ? "" : ", ") + type->word;
  return words;
}

}  // namespace cnn
