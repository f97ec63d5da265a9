#pragma once
// The recomputation search for networks too deep for the greedy descent (recompute_search.hpp):
// one pass over the candidates, best first, in time near-linear in the network's size.
//
// The descent evaluates every candidate at every move, O(n^3) on a chain of n layers, and lets a
// recomputation read another recomputed output, which then gets a temporary copy of its own: on
// a chain of n ReLUs it recomputes them all, each from the convolution before them, n^2 / 2
// recomputations (+3,000% compute on 200 ReLUs, a plan no memory holds on 10,000). The sweep
// takes a move only where no recomputation reads a value another move recomputes for its own
// backward: every output is then recomputed once for backward, and the intermediate values of a
// move (a BatchNorm under its ReLU) once per recomputation that reads them. The schedule stays
// linear in the network's size, and so does each evaluation of a set.
#include <vector>

#include "engine/plan/detail/cost_model.hpp"
#include "engine/plan/detail/step_plan.hpp"

namespace cnn {

// One move: the node whose output backward reads (recomputed instead of kept), then the
// forward-only ancestors recomputed with it (a BatchNorm under a ReLU).
using RecomputeMove = std::vector<int>;

// The moves the sweep takes on the plan without recomputation (`base`), in the order taken: the
// most bytes freed per second of recomputation first (ties: the lower node), each compatible with
// those before it. `cheap_only`: element-wise and normalisation layers only. `at_time` >= 0: only
// outputs kept across that time step (the peak's); -1: any output kept for backward.
std::vector<RecomputeMove> chainless_moves(const Network& network, const StepNeeds& needs, const CostModel& cost,
                                           const StepSchedule& base, bool cheap_only, int at_time);

// The set of the first `count` moves, for `network`.
RecomputeSet set_of_moves(const Network& network, const std::vector<RecomputeMove>& moves, std::size_t count);

}  // namespace cnn
