#include "layers/dropout.hpp"

#include "base/error.hpp"

namespace cnn {

Dropout::Dropout(float p) : p_(p) {
  if (!(p >= 0.f && p < 1.f)) throw ConfigError("dropout: p must be in [0, 1)");
}

void Dropout::forward(const LayerContext& c) {
  if (c.training) {
    Tensor mask = c.saved[0];
    mask.shape = c.output.shape;
    c.backend->dropout_forward(c.inputs[0], c.output, mask, p_, c.step, static_cast<std::uint64_t>(c.node));
  } else {
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
