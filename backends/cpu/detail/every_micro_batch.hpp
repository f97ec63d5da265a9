#pragma once
// The CPU backend's workspace queries answer for every micro-batch up to the one asked about.
//
// Note [A workspace for every smaller micro-batch]
// The plan asks each layer's workspace once, at the planned micro-batch, and a step then runs any
// smaller micro-batch in it: an epoch's short last batch, accumulation's last micro-batch, a
// replay after an out-of-memory failure (Backend's workspace contract, engine/core/backend.hpp).
// The CPU kernels choose their layout from the batch and the thread count (depthwise
// backward-filter by channel while the tensors are cache-sized and by plane beyond, each with its
// own scratch; the products' blocking), so a smaller micro-batch may need more than a larger
// one. The queries therefore answer the most that any micro-batch from 1 to the one asked about
// needs, while each kernel checks its workspace against the need at its own shape. The needs are
// arithmetic on the shapes: asking each micro-batch costs microseconds, once, at planning.
#include <algorithm>
#include <cstddef>

#include <cnnengine/engine/core/tensor.hpp>

namespace cnn::cpu {

// `shape` with a batch of n: the shape a query asks about at each smaller micro-batch.
inline Shape at_batch(Shape shape, int n) {
  shape[0] = n;
  return shape;
}

// The most need(n) for n from 1 to `micro_batch` (at least 1).
template <class Need>
std::size_t most_over_micro_batches(int micro_batch, Need&& need) {
  std::size_t most = 0;
  for (int n = 1; n <= std::max(micro_batch, 1); ++n) most = std::max(most, need(n));
  return most;
}

}  // namespace cnn::cpu
