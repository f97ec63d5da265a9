#pragma once
// Which outputs a training step recomputes during backward instead of keeping from forward
// (docs/design.md, "Recomputation"). A greedy descent on the step's peak: at the time step where
// the most bytes are live, among the outputs kept across it, recompute the one that frees the most
// bytes there per second of recomputation (cost_model.hpp), together with the ancestors that would
// otherwise be kept in its place (a ReLU after a BatchNorm takes the BatchNorm along), as long as
// no other time step rises above that peak. Checkmate solves this as an integer program; the
// greedy answer is what the plan can compute for every candidate micro-batch before step 1.
#include <cstddef>

#include "engine/plan/detail/cost_model.hpp"
#include "engine/plan/detail/step_plan.hpp"

namespace cnn {

// Note [Two searches]: the descent evaluates every candidate at every move (O(n^3) on a chain of
// n layers) and may recompute long chains of outputs from one another (O(n^2) recomputations,
// recompute_sweep.hpp). Up to this many nodes (every preset: resnet18 has 70) it is kept, for its
// tighter plans; beyond, the sweep, near-linear in the network's size (benchmarks/plan_scaling).
constexpr int kDescentLimit = 160;

// RecomputePolicy::cheap: element-wise and normalisation outputs (Layer::cheap_to_recompute),
// each as long as it lowers the peak.
RecomputeSet cheap_recompute_set(const Network& network, const StepNeeds& needs, const CostModel& cost);

struct RecomputeChoice {
  RecomputeSet set;
  StepPlan plan;  // the training plan with it
  bool fits = false;
};

// RecomputePolicy::automatic: the least recomputation the descent finds whose training plan's
// arena is at most `arena_cap` bytes (nothing where the plan fits as it is); where none is found,
// the smallest plan it reached, with fits false.
RecomputeChoice least_recompute_within(const Network& network, const StepNeeds& needs, const CostModel& cost,
                                       std::size_t arena_cap);

}  // namespace cnn
