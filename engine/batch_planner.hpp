#pragma once
// Answers "how many bytes at micro-batch b?" and "which b fits?" from the plans alone, before
// anything is allocated. The trainer and `train_images --plan` both ask it.
#include "engine/memory_report.hpp"
#include "engine/network.hpp"
#include "engine/step_plan.hpp"

namespace cnn {

struct BatchPlanOptions {
  int batch = 64;                   // samples per optimizer step (B)
  int micro_batch = 0;              // 0: the largest that fits the budget, at most B
  int accumulate = 0;               // > 0: micro-batch ceil(B / this), so at most this many per step
  std::size_t memory_budget = 0;    // 0: no limit
  std::size_t loader_staging = 0;   // bytes the caller's loader reserved (counted in the budget)
  std::size_t workspace_limit = std::size_t{256} << 20;  // per layer
  int optimizer_slots = 0;          // floats of optimizer state per parameter
  std::size_t extra_persistent = 0; // small persistent buffers of the trainer
  // Let the engine rewrite the network where the result is provably the same (today: ReLU then
  // max pooling becomes max pooling then ReLU; see Network::commute_relu_and_max_pool). The
  // planner applies it, so that what it plans is what the trainer runs.
  bool rewrite_graph = true;
};

// The plans of one micro-batch and what they take: what the trainer builds, and what it reports.
struct MicroBatchPlan {
  StepPlan training, inference;
  MemoryBreakdown breakdown;
};

class BatchPlanner {
 public:
  BatchPlanner(Network& network, Backend& backend, BatchPlanOptions options);
  // The step plans at micro-batch b, with the workspace limit below, and their bytes.
  MicroBatchPlan plan(int micro_batch) const;
  MemoryBreakdown breakdown(int micro_batch) const { return plan(micro_batch).breakdown; }
  // The per-layer workspace limit for micro-batch b: the options' limit, lowered under a budget
  // until the plan fits where the backend has methods that need less workspace (cuDNN's slower
  // convolution algorithms). Keeping the micro-batch is preferred to the fastest algorithm.
  std::size_t workspace_limit(int micro_batch) const;
  // The largest micro-batch whose plan fits the budget, at most `limit`; 0 if none does.
  int largest_fitting(int limit) const;
  // What the options ask for: an explicit micro-batch or count, else the largest that fits.
  // 0 when nothing fits.
  int choose() const;
  const BatchPlanOptions& options() const { return options_; }

 private:
  Network& net_;
  Backend& backend_;
  BatchPlanOptions options_;

  MicroBatchPlan plan_at(int micro_batch, std::size_t workspace_limit) const;
};

}  // namespace cnn
