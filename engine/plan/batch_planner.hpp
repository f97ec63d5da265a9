#pragma once
// Answers "how many bytes at micro-batch b?" and "which b fits?" from the plans alone, before
// anything is allocated. The trainer and `train_images --plan` both ask it.
#include <cstddef>
#include <map>
#include <utility>
#include <vector>

#include <cnnengine/engine/core/network.hpp>
#include <cnnengine/engine/plan/memory_report.hpp>
#include <cnnengine/memory/memory_stack.hpp>

namespace cnn {

// What the planner plans with. The trainer's are planning_options(TrainerOptions, ...)
// (engine/train/trainer.hpp): a plan made with them is the trainer's.
struct BatchPlanOptions {
  int batch = 64;                   // samples per optimizer step (B)
  int micro_batch = 0;              // 0: the largest that fits the budget, at most B
  int accumulate = 0;               // > 0: micro-batch ceil(B / this), so at most this many per step
  // The budget (0: none) and what it holds beside the plan: the libraries' workspaces, a
  // communicator's buffers, the loaders' staging (memory/memory_stack.hpp).
  memory::BudgetAccount account;
  memory::Strategy strategy = memory::Strategy::planned;  // where the trainer's step buffers come from
  std::size_t workspace_limit = std::size_t{256} << 20;  // per layer
  int optimizer_slots = 0;          // floats of optimizer state per parameter
  std::size_t extra_persistent = 0; // small persistent buffers of the trainer
  // Let the engine rewrite the network where the result is provably the same (today: ReLU then
  // max pooling becomes max pooling then ReLU; see Network::commute_relu_and_max_pool). The
  // planner applies it, so that what it plans is what the trainer runs.
  bool rewrite_graph = true;
  // What a step may recompute during backward instead of keeping (docs/design.md,
  // "Recomputation"). Under `automatic` with no micro-batch or count given, the planner weighs
  // micro-batch and recomputation together for the highest expected throughput.
  RecomputePolicy recompute = RecomputePolicy::none;
  // How the step stores the values between layers: in 16 bits (bf16, fp16) they take half the
  // bytes (engine/plan/detail/step_plan.cpp, Note [16-bit values]); `narrow_values` says whether
  // only where the plan comes out smaller (chosen_value_format). The trainer's follows its
  // backend's precision (value_format).
  ValueFormat values = ValueFormat::fp32;
  NarrowValues narrow_values = NarrowValues::where_smaller;
};

// How a step of `samples` runs at micro-batch b: micro-batches of b, then the rest. A rest below
// `need` samples (a layer's training minimum) takes what it lacks from the micro-batch before it,
// which b >= 2 * need - 1 always allows. Needs samples >= need. (No vector: a step allocates nothing.)
struct MicroBatchSplit {
  int count = 0;
  int micro_batch = 0;
  int before_last = 0;  // less than micro_batch only where it gave to the last
  int last = 0;
  int size(int j) const { return j == count - 1 ? last : j == count - 2 ? before_last : micro_batch; }
};
MicroBatchSplit split_into_micro_batches(int samples, int micro_batch, int need = 1);

// Not thread-safe: it keeps what it planned.
class BatchPlanner {
 public:
  // `query_memory`: where the backend's workspace queries take their scratch while this planner
  // plans (the trainer's budget: Backend::set_query_memory); null: the backend's device memory.
  BatchPlanner(Network& network, Backend& backend, BatchPlanOptions options,
               memory::MemoryResource* query_memory = nullptr);
  // The bytes of the step plans at micro-batch b, with the workspace limit below, recomputing as
  // the options' policy (or `policy`) asks.
  MemoryBreakdown breakdown(int micro_batch) const;
  MemoryBreakdown breakdown(int micro_batch, RecomputePolicy policy) const;
  // What a trainer's memory stack holds outside the step arena (MemoryStack::build_step_buffers),
  // given any micro-batch's breakdown: the persistent blocks and the input staging at the full
  // batch, the most a step stages.
  std::size_t bytes_outside_arena(const MemoryBreakdown& breakdown) const;
  // The per-layer workspace limit for micro-batch b: the options' limit, lowered under a budget
  // until the plan fits where the backend has methods that need less workspace (cuDNN's slower
  // convolution algorithms). Keeping the micro-batch is preferred to the fastest algorithm, and
  // recomputation (which the plan tries first) to a slower algorithm.
  std::size_t workspace_limit(int micro_batch) const;
  std::size_t workspace_limit(int micro_batch, RecomputePolicy policy) const;
  // The largest micro-batch whose plan fits the budget, at most `limit`; 0 if none does.
  int largest_fitting(int limit) const;
  int largest_fitting(int limit, RecomputePolicy policy) const;
  // What the options ask for: an explicit micro-batch or count; else the largest that fits, or
  // under RecomputePolicy::automatic the fastest of weighed_micro_batches(). 0 when nothing fits.
  int choose() const;
  // Under RecomputePolicy::automatic and a budget: the micro-batches weighed (the largest that
  // fits without recomputation, and larger ones that need fewer micro-batches per step up to the
  // largest that fits with it), each with its plan and expected throughput. Empty otherwise.
  std::vector<MemoryBreakdown> weighed_micro_batches() const;
  // The micro-batch the options ask for (an explicit one, or from the accumulation count); 0:
  // the largest that fits.
  int asked_micro_batch() const;
  const BatchPlanOptions& options() const { return options_; }
  Network& network() const { return net_; }
  Backend& backend() const { return backend_; }
  memory::MemoryResource* query_memory() const { return query_memory_; }
  // What the network's layers need of a training micro-batch, and the smallest micro-batch the
  // planner will use: 1, or with a need of n > 1 samples 2n - 1 (at most the batch), so that any
  // step of n samples or more splits into micro-batches of n or more.
  const TrainingBatchNeed& training_batch_need() const { return need_; }
  int smallest_micro_batch() const { return smallest_; }

 private:
  Network& net_;
  Backend& backend_;
  BatchPlanOptions options_;
  memory::MemoryResource* query_memory_;
  TrainingBatchNeed need_;
  int smallest_ = 1;
  int most_ = 1;  // the largest micro-batch whose tensors the backend can hold
  // Each micro-batch is planned once per policy: the search for the largest that fits asks again and again.
  mutable std::map<std::pair<int, RecomputePolicy>, MemoryBreakdown> breakdowns_;
};

}  // namespace cnn
