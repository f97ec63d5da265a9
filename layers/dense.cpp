#include "layers/dense.hpp"

namespace cnn {

Dense::Dense(int units, bool bias) : units_(units), bias_(bias) {
  if (units <= 0) throw std::invalid_argument("dense: units must be positive");
}

Shape Dense::output_shape(const std::vector<Shape>& inputs) {
  in_features_ = static_cast<int>(inputs.at(0).elements());
  return Shape{units_};
}

std::vector<ParamSpec> Dense::parameters() const {
  std::vector<ParamSpec> specs{{"weight", Shape{units_, in_features_}, Init::he_normal, in_features_, units_, true}};
  if (bias_) specs.push_back({"bias", Shape{units_}, Init::zeros, in_features_, units_, true});
  return specs;
}

void Dense::forward(const LayerContext& c) {
  c.backend->dense_forward(c.inputs[0], c.params[0], bias_ ? c.params[1] : Tensor{}, c.output);
}

void Dense::backward(const LayerContext& c) {
  c.backend->dense_backward_weights(c.inputs[0], c.grad_output, c.grads[0], bias_ ? c.grads[1] : Tensor{});
  if (wants_gradient(c, 0)) c.backend->dense_backward_data(c.grad_output, c.params[0], c.grad_inputs[0], c.accumulate[0]);
}

}  // namespace cnn
