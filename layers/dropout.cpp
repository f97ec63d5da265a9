#include "layers/dropout.hpp"

#include <cstdint>

#include <cnnengine/base/error.hpp>
#include <cnnengine/engine/core/backend.hpp>
#include <cnnengine/layers/builtin_layers.hpp>
#include <cnnengine/layers/registry.hpp>

namespace cnn {

Dropout::Dropout(float p) : p_(p) {
  if (!(p >= 0.f && p < 1.f)) throw ConfigError("dropout: p must be in [0, 1)");
}

void Dropout::forward(const LayerContext& c) {
  if (c.training) {
    Tensor mask = c.saved[0];
    mask.shape = c.output.shape;
    c.backend->dropout_forward(c.inputs[0], c.output, mask, p_, c.step, static_cast<std::uint64_t>(c.node));
  } else if (c.inputs[0].data != c.output.data) {  // in place: nothing to do
    c.backend->copy_or_add(c.inputs[0], c.output, false);
  }
}

void Dropout::backward(const LayerContext& c) {
  if (!wants_gradient(c, 0)) return;
  Tensor mask = c.saved[0];
  mask.shape = c.grad_output.shape;
  c.backend->dropout_backward(c.grad_output, mask, c.grad_inputs[0], c.accumulate[0]);
}

}  // namespace cnn

namespace cnn {

LayerType dropout_type() {
  LayerType type;
  type.type_name = "dropout";
  type.layer_class = &typeid(Dropout);
  type.word = "dropout";
  type.usage = "dropout P";
  type.parse = [](LayerLine& line) {
    line.expect_arguments(1);
    return std::make_unique<Dropout>(static_cast<float>(line.number(0)));
  };
  type.text = [](const Layer& layer, std::span<const std::string>) {
    return exact_text(static_cast<const Dropout&>(layer).p());
  };
  type.onnx = [](const Layer&, OnnxNodes& graph) { graph.pass_through(0); };  // inference: the identity
  return type;
}

std::unique_ptr<Layer> layers::dropout(float p) { return std::make_unique<Dropout>(p); }

}  // namespace cnn
