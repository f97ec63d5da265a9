#include "engine/train/detail/gradient_buckets.hpp"

#include <algorithm>

namespace cnn {

GradientBuckets::GradientBuckets(const Network& network, const ParameterStore& params, Communicator& communicator,
                                 std::size_t bucket_bytes)
    : communicator_(communicator), node_buckets_(static_cast<std::size_t>(network.size())) {
  const Tensor block = params.gradients();
  const std::size_t total = params.trainable_count() ? block.elements() : 0;
  const std::size_t cap = std::clamp<std::size_t>(bucket_bytes / sizeof(float), 1, std::size_t{1} << 30);
  // Bucket k holds floats [total - (k + 1) cap, total - k cap) of the block.
  for (std::size_t end = total; end > 0;) {
    const std::size_t begin = end > cap ? end - cap : 0;
    buckets_.push_back({Tensor{block.data + begin, Shape{static_cast<int>(end - begin)}}, 0, 0});
    end = begin;
  }
  auto bucket_of = [&](std::size_t offset) { return static_cast<int>((total - 1 - offset) / cap); };
  for (int id = 1; id < network.size(); ++id) {
    std::size_t lo = total, hi = 0;  // the node's floats in the block
    for (const Tensor& g : params.grads(id)) {
      if (g.empty()) continue;
      const auto offset = static_cast<std::size_t>(g.data - block.data);
      lo = std::min(lo, offset);
      hi = std::max(hi, offset + g.elements());
    }
    if (hi == 0) continue;
    NodeBuckets& nb = node_buckets_[static_cast<std::size_t>(id)];
    nb.first = bucket_of(hi - 1);
    nb.last = bucket_of(lo);
    for (int b = nb.first; b <= nb.last; ++b) ++buckets_[static_cast<std::size_t>(b)].nodes;
  }
  begin();
}

void GradientBuckets::begin() {
  for (Bucket& b : buckets_) b.pending = b.nodes;
  launched_ = 0;
}

void GradientBuckets::node_done(int node) {
  const NodeBuckets& nb = node_buckets_[static_cast<std::size_t>(node)];
  for (int b = nb.first; b >= 0 && b <= nb.last; ++b) --buckets_[static_cast<std::size_t>(b)].pending;
  launch_ready();
  communicator_.progress();
}

void GradientBuckets::launch_ready() {
  while (launched_ < count() && buckets_[static_cast<std::size_t>(launched_)].pending == 0) launch_next();
}

void GradientBuckets::finish() {
  while (launched_ < count()) launch_next();
  communicator_.wait_started();
}

void GradientBuckets::launch_next() {
  communicator_.start_sum(buckets_[static_cast<std::size_t>(launched_)].range);
  ++launched_;  // after it started: a sum that failed to start is not counted as launched
}

}  // namespace cnn
