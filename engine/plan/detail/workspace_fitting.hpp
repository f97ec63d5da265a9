#pragma once
// The per-layer workspace limit under a budget, lowered until the plan fits where the backend has
// leaner methods: what the training and the inference planners both do at each micro-batch.
#include <algorithm>
#include <cstddef>
#include <functional>
#include <utility>

namespace cnn {

// The plan plan_at(limit) gives at `limit`, or under a budget (0: none) at the largest limit found
// to fit. No layer's workspace can be more than the whole budget, which also bounds the scratch
// that cuDNN's algorithm measurement takes while planning. Then each round asks the largest
// workspace to give up what the plan is over the budget; the arena need not shrink by as much
// (that workspace may not be live at the peak), hence rounds. A backend with nothing leaner (the
// CPU's im2col) stops them at once. Plan holds a MemoryBreakdown `breakdown` and says its
// largest_workspace().
template <class Plan>
Plan plan_within_workspace_budget(std::size_t limit, std::size_t budget,
                                  const std::function<Plan(std::size_t)>& plan_at) {
  if (budget == 0) return plan_at(limit);
  Plan p = plan_at(std::min(limit, budget));
  for (int round = 0; round < 8 && !p.breakdown.fits(); ++round) {
    const std::size_t largest = p.largest_workspace();
    if (largest == 0) break;
    const std::size_t over = p.breakdown.total() - p.breakdown.budget;
    Plan smaller = plan_at(largest > over ? largest - over : 0);
    if (smaller.breakdown.total() >= p.breakdown.total()) break;
    p = std::move(smaller);
  }
  return p;
}

}  // namespace cnn
