#pragma once
// The loss of a step or an evaluation: the one place that turns a network's task (base/task.hpp)
// into the backend call that computes it, for a trainer and a predictor alike.
#include <cstddef>

#include <cnnengine/base/task.hpp>
#include <cnnengine/engine/core/backend.hpp>

namespace cnn {

// What a loss adds to, three adjacent floats at a fixed place in the backend's memory: the sum of
// the samples' losses, what the task's accuracy counts right, and what it counts over (a
// classification's count is its samples, which its loss does not add: the caller knows them).
struct LossSums {
  float loss = 0.0f;
  float correct = 0.0f;
  float counted = 0.0f;
};
inline constexpr int kLossSumFloats = 3;

// The floats of class weights (segment) or positive weights (multilabel) the loss reads from the
// backend's memory: 0 where it has none.
std::size_t loss_weight_floats(const LossOptions& loss);

// The accuracy's denominator for `samples` samples: their count for a classification, the loss's
// `counted` for the others.
double counted_over(Task task, double counted, std::size_t samples);

// Runs `loss` over `output` ([n, ...] the network's) and the n samples' targets in the plan's
// slot (`targets`: int32 labels, a mask's bytes or floats, as cnn::target_bytes lays them out),
// adding to `sums` (kLossSumFloats floats) and, where `gradient` is not empty, writing it scaled
// by step->grad_scale. `weights` holds loss_weight_floats(loss) floats (empty where 0); `ws` the
// backend's loss_workspace_bytes for the task and output.
void run_loss(Backend& backend, const LossOptions& loss, const Tensor& output, void* targets, const Tensor& weights,
              Tensor gradient, const StepScalars* step, float* sums, Workspace ws);

}  // namespace cnn
