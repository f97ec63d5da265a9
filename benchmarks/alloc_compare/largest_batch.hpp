#pragma once
// The largest batch B whose work fits a budget. Planned: computed from the plans before anything
// is allocated (BatchPlanner::largest_fitting). The others: found by running, bisecting over B
// with a short sequence of steps (churn over [B/2, B], or every step at B) under the budget;
// B fits when that sequence has no out-of-memory failure. A dynamic strategy need not be
// monotone in B: bisection reports a B that fits, not the largest of all that might.
#include <cstddef>
#include <string>

#include "workbench.hpp"

namespace alloc_compare {

struct BatchSearch {
  std::size_t budget = 0;
  int limit = 1024;      // largest B tried
  long steps = 200;      // per trial
  bool fixed_batch = false;
};

int largest_batch(Workbench& bench, cnn::memory::Strategy strategy, const BatchSearch& search);

// Runs the search's sequence at `batch` (which must fit) and at batch + 1 (which must not, unless
// batch is the limit): for planned, this checks the planner's bytes against a real run.
struct Confirmation {
  bool fits = false;
  bool next_refused = false;
};
Confirmation confirm_by_running(Workbench& bench, cnn::memory::Strategy strategy, const BatchSearch& search, int batch);

}  // namespace alloc_compare
