#include <catch2/catch.hpp>

#include <set>

#include <cnnengine/base/error.hpp>
#include <cnnengine/layers/registry.hpp>
#include "layers/relu.hpp"

using namespace cnn;

TEST_CASE("the registry lists every built-in layer once, with its word, usage and type name", "[layers]") {
  std::set<std::string> words, type_names;
  for (const LayerType* type : layer_types()) {
    INFO(type->word);
    CHECK(words.insert(type->word).second);
    CHECK(type_names.insert(type->type_name).second);
    CHECK(type->usage.rfind(type->word, 0) == 0);  // the usage begins with the word
    for (const std::string& option : type->options) CHECK(type->usage.find("[" + option + "=") != std::string::npos);
    CHECK(layer_type_for_word(type->word) == type);
  }
  for (const char* word : {"conv", "dwconv", "deconv", "relu", "leakyrelu", "relu6", "sigmoid", "tanh", "silu", "gelu",
                           "hardswish", "hardsigmoid", "flatten", "maxpool", "avgpool", "globalavgpool",
                           "globalmaxpool", "upsample", "batchnorm", "groupnorm", "layernorm", "dropout", "dense", "add",
                           "concat", "mul"})
    CHECK(words.count(word));
  for (const char* name : {"conv2d", "depthwise_conv2d", "conv_transpose2d", "dense", "relu", "leaky_relu", "relu6",
                           "sigmoid", "tanh", "silu", "gelu", "hardswish", "hardsigmoid", "maxpool2d", "avgpool2d",
                           "global_avgpool", "global_maxpool", "upsample", "batchnorm2d", "group_norm", "layer_norm",
                           "dropout", "add", "concat", "multiply", "flatten"})
    CHECK(type_names.count(name));
  CHECK(layer_usages().size() == layer_types().size());
  CHECK(layer_words().rfind("conv, dwconv, deconv, relu, leakyrelu", 0) == 0);
  CHECK(layer_type_for_word("frobnicate") == nullptr);
}

namespace {
// A layer of one's own that takes a built-in's type name: not the built-in for text or ONNX.
class NotRelu final : public Layer {
 public:
  std::string type_name() const override { return "relu"; }
  std::string describe() const override { return "not relu"; }
  Shape output_shape(const std::vector<Shape>& inputs) override { return inputs.at(0); }
  void forward(const LayerContext&) override {}
  void backward(const LayerContext&) override {}
};

LayerType type_with(const std::string& type_name, const std::string& word) {
  LayerType type;
  type.type_name = type_name;
  type.word = word;
  type.parse = [](LayerLine&) { return std::make_unique<ReLU>(); };
  return type;
}

std::string registration_error(LayerType type) {
  try {
    register_layer_type(std::move(type));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("a layer is found by its type name and class", "[layers]") {
  const LayerType* relu = layer_type_of(ReLU());
  REQUIRE(relu);
  CHECK(relu->word == "relu");
  CHECK(layer_type_of(NotRelu()) == nullptr);
}

TEST_CASE("register_layer_type refuses taken or malformed words and names", "[layers]") {
  using Catch::Contains;
  CHECK_THAT(registration_error(type_with("my_conv", "conv")), Contains("the word 'conv' is taken"));
  CHECK_THAT(registration_error(type_with("conv2d", "myconv")), Contains("the type name 'conv2d' is taken (by conv)"));
  CHECK_THAT(registration_error(type_with("spaced", "two words")), Contains("is not one word"));
  CHECK_THAT(registration_error(type_with("eq", "a=b")), Contains("is not one word"));
  CHECK_THAT(registration_error(type_with("", "nameless")), Contains("nameless has no type name"));
  LayerType unparsed = type_with("unparsed", "unparsed");
  unparsed.parse = nullptr;
  CHECK_THAT(registration_error(unparsed), Contains("unparsed has no parse"));
  LayerType as_option = type_with("as_option", "as_option");
  as_option.options = {"as"};
  CHECK_THAT(registration_error(as_option), Contains("cannot take the option 'as='"));
  CHECK(layer_type_for_word("myconv") == nullptr);
  CHECK(layer_type_for_word("nameless") == nullptr);
}
