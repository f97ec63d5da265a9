#pragma once
// Runs one micro-batch through a plan: copy in, forward, loss, backward. Knows nothing of where
// memory comes from (StepMemory) or which device runs the kernels (Backend).
#include <array>
#include <cstdint>

#include "engine/parameter_store.hpp"
#include "engine/step_memory.hpp"

namespace cnn {

struct MicroBatch {
  const float* images = nullptr;          // host (staging) memory, n samples
  const std::int32_t* labels = nullptr;
  int size = 0;                           // n <= the plan's micro-batch
  int first = 0;                          // index of its first sample in the optimizer step's batch
};

class StepExecutor {
 public:
  StepExecutor(Network& network, Backend& backend, ParameterStore& params, const StepPlan& plan, StepMemory& memory);

  // Adds the summed loss to loss_sum[0] and correct predictions to correct[0]. In training,
  // parameter gradients accumulate with the loss gradient scaled by grad_scale. `seed` is the
  // optimizer step's: the same for all its micro-batches.
  void run(const MicroBatch& batch, float grad_scale, Tensor loss_sum, Tensor correct, std::uint64_t seed);

 private:
  Tensor value(int node, int n) const;
  Tensor gradient(int node, int n) const;
  Tensor buffer(int index, Shape shape) const;

  Network& net_;
  Backend& backend_;
  ParameterStore& params_;
  const StepPlan& plan_;
  StepMemory& memory_;
  std::vector<Tensor> inputs_, grad_inputs_, saved_;
  std::array<bool, 8> accumulate_{};
};

}  // namespace cnn
