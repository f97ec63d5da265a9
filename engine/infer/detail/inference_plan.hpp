#pragma once
// The forward-only step plan at one micro-batch and what it takes: what a Predictor reserves and
// runs, and what InferencePlanner::breakdown reports.
#include "engine/infer/inference_planner.hpp"
#include "engine/plan/detail/step_plan.hpp"

namespace cnn {

struct InferencePlan {
  StepPlan step;
  MemoryBreakdown breakdown;

  std::size_t largest_workspace() const { return step.largest_workspace(); }
};

// At micro-batch b, with the largest per-layer workspace limit that fits the budget.
InferencePlan plan_inference(const InferencePlanner& planner, int micro_batch);

}  // namespace cnn
