#include "layers/dense.hpp"

#include "base/error.hpp"

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
  std::vector<ParamSpec> specs{{"weight", Shape{units_, in_features}, Init::he_normal, in_features, units_, true}};
  if (bias_) specs.push_back({"bias", Shape{units_}, Init::zeros, in_features, units_, true});
  return specs;
}

LayerCost Dense::forward_cost() const {
  const double in = static_cast<double>(in_.elements());
  return {2 * in * units_ + (bias_ ? units_ : 0), sizeof(float) * (in + units_)};
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
