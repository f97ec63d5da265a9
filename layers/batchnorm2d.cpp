#include "layers/batchnorm2d.hpp"

#include <stdexcept>

#include <cnnengine/base/error.hpp>
#include <cnnengine/engine/core/backend.hpp>
#include <cnnengine/engine/core/communicator.hpp>
#include <cnnengine/layers/builtin_layers.hpp>
#include <cnnengine/layers/registry.hpp>

namespace cnn {

BatchNorm2D::BatchNorm2D(float momentum, float epsilon) : momentum_(momentum), epsilon_(epsilon) {
  if (!(momentum > 0.f && momentum <= 1.f) || !(epsilon > 0.f))
    throw ConfigError("batchnorm2d: momentum must be in (0, 1] and epsilon positive");
}

Shape BatchNorm2D::output_shape(const std::vector<Shape>& inputs) {
  const Shape& x = inputs.at(0);
  if (x.rank != 3 && x.rank != 1) throw ShapeError("batchnorm2d: needs a CxHxW or C input, got " + x.str());
  channels_ = x[0];
  values_per_channel_ = x.elements() / static_cast<std::size_t>(channels_);
  return x;
}

TrainingBatchNeed BatchNorm2D::training_batch_need() const {
  // One value per channel has no variance: it would normalise to beta, pass no gradient back and
  // pull the running variance towards zero. Frameworks fail there mid-run; the planner refuses it.
  if (values_per_channel_ != 1) return {};
  return {2, "it normalises one value per channel per sample, and a batch variance needs two samples"};
}

std::vector<ParamSpec> BatchNorm2D::parameters() const {
  const Shape c{channels_};
  return {{"gamma", c, Init::ones, channels_, channels_, true},
          {"beta", c, Init::zeros, channels_, channels_, true},
          {"running_mean", c, Init::zeros, channels_, channels_, false},
          {"running_var", c, Init::ones, channels_, channels_, false}};
}

void BatchNorm2D::check_training_batch(const LayerContext& c) const {
  if (static_cast<std::size_t>(c.batch) * values_per_channel_ < 2)
    throw ConfigError("batchnorm2d: training on a micro-batch of " + std::to_string(c.batch) +
                      " sample(s) with one value per channel: " + training_batch_need().why);
}

void BatchNorm2D::forward(const LayerContext& c) {
  if (c.training) check_training_batch(c);
  if (c.training && c.cross_rank) return forward_over_ranks(c);
  if (c.training)
    c.backend->batchnorm_forward_training(c.inputs[0], c.params[0], c.params[1], c.output, c.params[2], c.params[3],
                                          momentum_, epsilon_, c.saved[0], c.saved[1]);
  else
    c.backend->batchnorm_forward_inference(c.inputs[0], c.params[0], c.params[1], c.params[2], c.params[3], epsilon_,
                                           c.output);
}

void BatchNorm2D::forward_then_relu(const LayerContext& c) {
  if (!c.training || c.cross_rank)
    throw std::logic_error("batchnorm2d: a ReLU in its calls outside training or in synchronised BatchNorm");
  check_training_batch(c);
  c.backend->batchnorm_relu_forward_training(c.inputs[0], c.params[0], c.params[1], c.output, c.params[2],
                                             c.params[3], momentum_, epsilon_, c.saved[0], c.saved[1]);
}

void BatchNorm2D::backward_through_relu(const LayerContext& c) {
  if (!wants_gradient(c, 0)) throw std::logic_error("batchnorm2d: backward without a buffer for the input gradient");
  if (c.cross_rank) throw std::logic_error("batchnorm2d: a ReLU in its calls in synchronised BatchNorm");
  c.backend->batchnorm_relu_backward(c.inputs[0], c.output, c.grad_output, c.params[0], c.saved[0], c.saved[1],
                                     epsilon_, c.grad_inputs[0], c.grads[0], c.grads[1], c.accumulate[0]);
}

void BatchNorm2D::forward_then_add_relu(const LayerContext& c) {
  if (!c.training || c.cross_rank || c.inputs.size() != 2)
    throw std::logic_error("batchnorm2d: an add and ReLU in its calls outside training, in synchronised BatchNorm or "
                           "without the add's other input");
  check_training_batch(c);
  c.backend->batchnorm_add_relu_forward_training(c.inputs[0], c.inputs[1], c.params[0], c.params[1], c.output,
                                                 c.params[2], c.params[3], momentum_, epsilon_, c.saved[0],
                                                 c.saved[1]);
}

void BatchNorm2D::backward_through_add_relu(const LayerContext& c) {
  if (!wants_gradient(c, 0)) throw std::logic_error("batchnorm2d: backward without a buffer for the input gradient");
  if (c.cross_rank || c.grad_inputs.size() != 2 || c.accumulate.size() != 2)
    throw std::logic_error("batchnorm2d: an add and ReLU in its calls in synchronised BatchNorm or without the add's "
                           "other gradient");
  c.backend->batchnorm_add_relu_backward(c.inputs[0], c.output, c.grad_output, c.params[0], c.saved[0], c.saved[1],
                                         epsilon_, c.grad_inputs[0], c.grads[0], c.grads[1], c.accumulate[0],
                                         c.grad_inputs[1], c.accumulate[1]);
}

void BatchNorm2D::recompute(const LayerContext& c) {
  c.backend->batchnorm_forward_saved(c.inputs[0], c.params[0], c.params[1], c.saved[0], c.saved[1], c.output);
}

LayerCost BatchNorm2D::forward_cost() const {
  const double n = static_cast<double>(values_per_channel_) * channels_;
  return {2 * n, 2 * sizeof(float) * n};  // the recomputation's: one multiply-add per value
}

void BatchNorm2D::backward(const LayerContext& c) {
  // The plan gives an input gradient buffer even where nothing reads it (backward_writes_input_gradient).
  if (!wants_gradient(c, 0)) throw std::logic_error("batchnorm2d: backward without a buffer for the input gradient");
  if (c.cross_rank) return backward_over_ranks(c);
  c.backend->batchnorm_backward(c.inputs[0], c.grad_output, c.params[0], c.saved[0], c.saved[1], epsilon_,
                                c.grad_inputs[0], c.grads[0], c.grads[1], c.accumulate[0]);
}

// Synchronised BatchNorm: the ranks' micro-batches are one batch. Every rank has the same
// micro-batch here (the trainer sees to it), so the values per channel are this one's times the ranks.
double BatchNorm2D::values_over_ranks(const LayerContext& c) const {
  return static_cast<double>(c.batch) * static_cast<double>(values_per_channel_) * c.cross_rank->communicator->ranks();
}

void BatchNorm2D::forward_over_ranks(const LayerContext& c) {
  Communicator& ranks = *c.cross_rank->communicator;
  const Tensor& x = c.inputs[0];
  const double count = values_over_ranks(c);
  // The saved buffers carry the sums between the calls, and end holding the statistics.
  const Tensor &sums = c.saved[0], &squares = c.saved[1];
  c.backend->batchnorm_channel_sums(x, sums);
  ranks.sum(sums);
  c.backend->batchnorm_centered_squares(x, sums, count, squares);
  ranks.sum(squares);
  c.backend->batchnorm_forward_from_sums(x, c.params[0], c.params[1], c.output, c.params[2], c.params[3], momentum_,
                                         epsilon_, count, sums, squares);
}

void BatchNorm2D::backward_over_ranks(const LayerContext& c) {
  Communicator& ranks = *c.cross_rank->communicator;
  const Tensor sums{c.cross_rank->scratch.data, Shape{2 * channels_}};
  c.backend->batchnorm_backward_sums(c.inputs[0], c.grad_output, c.saved[0], c.saved[1], sums);
  // This rank's own gamma and beta gradients: the trainer sums them over the ranks with the others.
  const Tensor sum_dy{sums.data, Shape{channels_}}, sum_dy_xhat{sums.data + channels_, Shape{channels_}};
  c.backend->copy_or_add(sum_dy_xhat, c.grads[0], true);
  c.backend->copy_or_add(sum_dy, c.grads[1], true);
  ranks.sum(sums);
  c.backend->batchnorm_backward_from_sums(c.inputs[0], c.grad_output, c.params[0], c.saved[0], c.saved[1], sums,
                                          values_over_ranks(c), c.grad_inputs[0], c.accumulate[0]);
}

}  // namespace cnn

namespace cnn {

LayerType batchnorm2d_type() {
  LayerType type;
  type.type_name = "batchnorm2d";
  type.layer_class = &typeid(BatchNorm2D);
  type.word = "batchnorm";
  type.usage = "batchnorm [momentum=M] [eps=E]";
  type.options = {"momentum", "eps"};
  type.parse = [](LayerLine& line) {
    line.expect_arguments(0);
    const float momentum = line.real_option("momentum", 0.1f);
    return std::make_unique<BatchNorm2D>(momentum, line.real_option("eps", 1e-5f));
  };
  type.text = [](const Layer& layer, std::span<const std::string>) {
    const auto& bn = static_cast<const BatchNorm2D&>(layer);
    std::string words;
    if (bn.momentum() != 0.1f) words += "momentum=" + exact_text(bn.momentum());
    if (bn.epsilon() != 1e-5f) words += std::string(words.empty() ? "" : " ") + "eps=" + exact_text(bn.epsilon());
    return words;
  };
  // Inference form: normalised by the running statistics (parameters 2 and 3).
  type.onnx = [](const Layer& layer, OnnxNodes& graph) {
    std::vector<std::string> inputs{graph.input(0), graph.parameter(0, "gamma"), graph.parameter(1, "beta"),
                                    graph.parameter(2, "running_mean"), graph.parameter(3, "running_var")};
    graph.add_output_node("BatchNormalization", inputs)
        .set_float("epsilon", static_cast<const BatchNorm2D&>(layer).epsilon());
  };
  return type;
}

std::unique_ptr<Layer> layers::batchnorm2d(float momentum, float epsilon) {
  return std::make_unique<BatchNorm2D>(momentum, epsilon);
}

}  // namespace cnn
