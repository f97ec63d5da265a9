#pragma once
// The largest micro-batch whose plan fits, found by bisection: what the training and the
// inference planners both ask.
#include <functional>

namespace cnn {

// The largest b in [smallest, limit] for which fits(b), assuming the plan grows with b; 0 where
// fits(smallest) is false or limit < smallest. It grows only nearly monotonically (the greedy
// offsets planner's arena may dip by a few KiB from one micro-batch to the next), so a few
// micro-batches above the bisection's answer are tried too.
int largest_fitting_micro_batch(int smallest, int limit, const std::function<bool(int)>& fits);

}  // namespace cnn
