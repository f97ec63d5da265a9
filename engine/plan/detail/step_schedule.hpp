#pragma once
// The order of a step's operations, one per time step: the input copy, forward layer by layer,
// the loss, then backward in reverse, with the recomputations the plan chose (docs/design.md,
// "Recomputation"). A recomputed output is written again just before the first backward that
// reads it, and kept until the last; where another recomputation needs it earlier (a residual
// block's output, read by the next block's addition), a temporary copy is recomputed for that
// one, so that no recomputation pulls another one early. From the order: the last time each
// output is read, from forward's buffer or from each recomputed copy.
#include <vector>

#include <cnnengine/engine/core/network.hpp>

namespace cnn {

// By node id: true where the node's output is not kept from forward for backward but recomputed
// during backward from what is kept. Empty: nothing is recomputed.
using RecomputeSet = std::vector<bool>;

enum class StepOpKind { copy_in, forward, loss, recompute, backward };

struct StepOp {
  StepOpKind kind;
  int node;
};

struct StepSchedule {
  std::vector<StepOp> ops;  // ops[t] runs at time t
  int loss_time = 0;
  std::vector<int> backward_time;  // by node; training only
  std::vector<int> kept_until;     // by value node: the last time forward's buffer is read
  // By time step, for a recomputation: the last time the output it writes is read, and the saved
  // buffers it writes again (a dropout's mask; -1 where the layer reads forward's).
  std::vector<int> output_until, saved_until;
  std::vector<bool> recomputed;  // by node: recomputed at least once

  int time_steps() const { return static_cast<int>(ops.size()); }
  bool recomputes(int node) const { return recomputed[static_cast<std::size_t>(node)]; }
};

// Whether a node's output may be recomputed: a layer that can run forward again (not a view),
// not the logits the loss reads, not a frozen layer (which runs forward in inference mode).
bool can_recompute(const Network& network, int node);

// `readers` is network.value_readers(). Throws std::logic_error where `recompute` names a node
// that cannot be recomputed, or holds an entry per node for another network.
StepSchedule schedule_step(const Network& network, const std::vector<std::vector<int>>& readers, bool training,
                           const RecomputeSet& recompute);

}  // namespace cnn
