#pragma once
// Where the first NaN or infinity of a run of floats is: the input check before a training step,
// and checkpoints (weights are never written or read back unless finite).
#include <cstddef>

namespace cnn {

// The index of the first NaN or infinity of `values`, or n. Blocks are tested on the exponent
// bits with no branch, so that the test runs at the speed of memory (benchmarks/input_check:
// about half the time of an element-by-element loop, benchmarks/results/input_check.txt); only
// a block that holds one is searched.
std::size_t first_non_finite(const float* values, std::size_t n);

}  // namespace cnn
