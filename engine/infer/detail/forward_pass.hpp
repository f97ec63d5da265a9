#pragma once
// Runs one micro-batch forward through an inference plan: the input copied in, each layer in
// inference form (BatchNorm on its running statistics, dropout the identity), then the loss or
// the logits. Every buffer sits at the plan's offset in one arena reserved before: a pass
// allocates nothing.
#include <vector>

#include "engine/core/detail/input_stager.hpp"
#include <cnnengine/engine/core/parameter_store.hpp>
#include "engine/infer/detail/forward_slots.hpp"
#include "engine/plan/detail/step_plan.hpp"

namespace cnn {

class ForwardPass {
 public:
  // `plan` is forward-only (StepPlan::training false); `arena` holds its arena_bytes().
  ForwardPass(Network& network, Backend& backend, const ParameterStore& params, const StepPlan& plan, void* arena,
              ForwardSlots& slots, InputStager& input);

  // With `loss`, the loss's sums are added to the slots'; with `logits`, the network's outputs
  // (n x the output's elements floats) are copied there.
  void run(const Batch& batch, bool loss, float* logits);
  // The last run's output, n samples of it, in the arena (valid until the next run).
  Tensor output(int n) const { return value(net_.last(), n); }

 private:
  Tensor buffer(int index, Shape shape) const;
  Tensor value(int node, int n) const;

  Network& net_;
  Backend& backend_;
  const ParameterStore& params_;
  const StepPlan& plan_;
  char* arena_;
  ForwardSlots& slots_;
  InputStager& input_;
  std::vector<Tensor> inputs_;  // sized once: a pass allocates nothing on the host either
};

}  // namespace cnn
