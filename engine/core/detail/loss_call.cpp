#include "engine/core/detail/loss_call.hpp"

#include <cmath>
#include <cstdint>

namespace cnn {

std::size_t loss_weight_floats(const LossOptions& loss) {
  if (loss.task == Task::segment) return loss.class_weights.size();
  if (loss.task == Task::multilabel) return loss.positive_weights.size();
  return 0;
}

double counted_over(Task task, double counted, std::size_t samples) {
  return task == Task::classify ? static_cast<double>(samples) : counted;
}

void run_loss(Backend& backend, const LossOptions& loss, const Tensor& output, void* targets, const Tensor& weights,
              Tensor gradient, const StepScalars* step, float* sums, Workspace ws) {
  const auto n = static_cast<std::size_t>(output.shape[0]);
  const Tensor loss_sum{sums, Shape{1}}, correct{sums + 1, Shape{1}}, counted{sums + 2, Shape{1}};
  switch (loss.task) {
    case Task::classify:
      backend.softmax_cross_entropy(output, IntTensor{static_cast<std::int32_t*>(targets), n}, loss.label_smoothing,
                                    gradient, step, loss_sum, correct);
      return;
    case Task::segment: {
      const std::size_t pixels = n * static_cast<std::size_t>(output.shape[2]) * static_cast<std::size_t>(output.shape[3]);
      backend.pixel_cross_entropy(output, ByteTensor{static_cast<const std::uint8_t*>(targets), pixels}, weights,
                                  gradient, step, loss_sum, correct, counted, ws);
      return;
    }
    case Task::multilabel:
    case Task::regress: break;
  }
  // [n, K] whatever the output's shape (a dense layer's [K], a 1x1 convolution's [K, 1, 1]).
  const Shape flat{output.shape[0], static_cast<int>(output.sample_elements())};
  const Tensor values{output.data, flat}, truth{static_cast<float*>(targets), flat};
  const Tensor grad = gradient.empty() ? Tensor{} : Tensor{gradient.data, flat};
  if (loss.task == Task::multilabel) {
    const float threshold_logit = std::log(loss.threshold / (1.0f - loss.threshold));
    backend.sigmoid_cross_entropy(values, truth, weights, threshold_logit, grad, step, loss_sum, correct, counted, ws);
  } else {
    backend.regression_loss(loss.regression, loss.huber_delta, values, truth, grad, step, loss_sum, correct, counted,
                            ws);
  }
}

}  // namespace cnn
