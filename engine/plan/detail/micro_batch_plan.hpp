#pragma once
// The step plans of one micro-batch and what they take: what the trainer builds, and what
// BatchPlanner::breakdown reports.
#include <algorithm>
#include <cstddef>
#include <optional>

#include "engine/plan/batch_planner.hpp"
#include "engine/plan/detail/step_plan.hpp"

namespace cnn {

struct MicroBatchPlan {
  StepPlan training, inference;
  MemoryBreakdown breakdown;

  std::size_t largest_workspace() const {
    return std::max(training.largest_workspace(), inference.largest_workspace());
  }
};

// The plans at micro-batch b with the workspace limit the planner allows at b (under a budget,
// lowered until the plan fits where the backend has leaner methods), recomputing as the options ask.
MicroBatchPlan plan_micro_batch(const BatchPlanner& planner, int micro_batch);
// The plans at micro-batch b with a given per-layer workspace limit and policy. Under
// RecomputePolicy::automatic, the training plan's arena within `arena_cap` where one is given (a
// recovery's), else within what the budget leaves (without a budget nothing is recomputed).
MicroBatchPlan plan_micro_batch(const BatchPlanner& planner, int micro_batch, std::size_t workspace_limit,
                                RecomputePolicy policy, std::optional<std::size_t> arena_cap = {});

}  // namespace cnn
