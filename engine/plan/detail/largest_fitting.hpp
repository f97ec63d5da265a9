#pragma once
// The largest micro-batch whose plan fits, found by bisection: what the training and the
// inference planners both ask.
#include <functional>

namespace cnn {

class Backend;
class Network;

// The largest b in [smallest, limit] for which fits(b), assuming the plan grows with b; 0 where
// fits(smallest) is false or limit < smallest. It grows only nearly monotonically (the greedy
// offsets planner's arena may dip by a few KiB from one micro-batch to the next), so a few
// micro-batches above the bisection's answer are tried too.
int largest_fitting_micro_batch(int smallest, int limit, const std::function<bool(int)>& fits);

// The largest micro-batch whose every value (one per node: the input, each layer's output) the
// backend can hold in one tensor (Backend::largest_tensor_elements), at most `most`.
int largest_describable_micro_batch(const Network& net, const Backend& backend, int most);

}  // namespace cnn
