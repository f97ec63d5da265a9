#include "layers/dense.hpp"

#include <cnnengine/base/error.hpp>
#include <cnnengine/engine/core/backend.hpp>
#include <cnnengine/layers/builtin_layers.hpp>
#include <cnnengine/layers/registry.hpp>

namespace cnn {

Dense::Dense(int units, bool bias) : units_(units), bias_(bias) {
  if (units <= 0) throw ConfigError("dense: units must be positive");
}

Shape Dense::output_shape(const std::vector<Shape>& inputs) {
  in_ = inputs.at(0);
  return Shape{units_};
}

std::size_t Dense::workspace_bytes(Backend& backend, int batch, ConvPass pass, std::size_t) {
  return backend.dense_workspace_bytes(in_.batched(batch), units_, pass);
}

std::vector<ParamSpec> Dense::parameters() const {
  const int in_features = static_cast<int>(in_.elements());
  std::vector<ParamSpec> specs{{"weight", Shape{units_, in_features}, Init::fan_in_uniform, in_features, units_, true}};
  if (bias_) specs.push_back({"bias", Shape{units_}, Init::fan_in_uniform, in_features, units_, true});
  return specs;
}

LayerCost Dense::forward_cost() const {
  const double in = static_cast<double>(in_.elements()), macs = in * units_;
  return {2 * macs + (bias_ ? units_ : 0), sizeof(float) * (in + units_), macs};
}

void Dense::forward(const LayerContext& c) {
  c.backend->dense_forward(c.inputs[0], c.params[0], bias_ ? c.params[1] : Tensor{}, c.output, c.workspace);
}

void Dense::backward(const LayerContext& c) {
  c.backend->dense_backward_weights(c.inputs[0], c.grad_output, c.grads[0], bias_ ? c.grads[1] : Tensor{}, c.workspace);
  if (wants_gradient(c, 0))
    c.backend->dense_backward_data(c.grad_output, c.params[0], c.grad_inputs[0], c.accumulate[0], c.workspace);
}

}  // namespace cnn

namespace cnn {

LayerType dense_type() {
  LayerType type;
  type.type_name = "dense";
  type.layer_class = &typeid(Dense);
  type.word = "dense";
  type.usage = "dense UNITS [bias=0|1]";
  type.options = {"bias"};
  type.parse = [](LayerLine& line) {
    line.expect_arguments(1);
    const int units = line.whole_number(0);
    return std::make_unique<Dense>(units, line.flag_option("bias", true));
  };
  type.text = [](const Layer& layer, std::span<const std::string>) {
    const auto& dense = static_cast<const Dense&>(layer);
    return std::to_string(dense.units()) + (dense.has_bias() ? "" : " bias=0");
  };
  // y = x w^T + b over the flattened sample: Gemm with transB, after a Flatten where the input
  // is an image (a dense layer may read a convolution's output directly).
  type.onnx = [](const Layer& layer, OnnxNodes& graph) {
    std::string in = graph.input(0);
    const Shape in_shape = graph.input_shape(0);
    if (in_shape.rank != 1) {
      const std::string flat = graph.name() + "_flatten";
      graph.add_inner_node("Flatten", {in}, flat, Shape{static_cast<int>(in_shape.elements())}).set_int("axis", 1);
      in = flat;
    }
    std::vector<std::string> inputs{in, graph.parameter(0, "weight")};
    if (static_cast<const Dense&>(layer).has_bias()) inputs.push_back(graph.parameter(1, "bias"));
    graph.add_output_node("Gemm", inputs).set_int("transB", 1);
  };
  return type;
}

std::unique_ptr<Layer> layers::dense(int units, bool bias) { return std::make_unique<Dense>(units, bias); }

}  // namespace cnn
