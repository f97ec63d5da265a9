#pragma once
// Data-parallel gradient sums: the gradient block cut into buckets of `bucket_bytes` from its end
// (backward finishes the last layers first), each summed over the ranks as soon as the backward
// of every layer with gradients in it is done in a step's last micro-batch, so that the sums
// overlap the rest of backward (as PyTorch's DDP does). The sums are in place: after finish(),
// every rank's gradient block holds the whole batch's.
//
// Note [Collective order]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A collective sum is matched across ranks by its place in each rank's sequence of collective
// calls, not by a name: every rank must make the same calls in the same order, or the job hangs
// or sums unrelated data. So:
// - buckets are launched strictly in index order (a bucket complete early waits for those
//   before it), and their boundaries depend on the network and bucket_bytes alone, the same on
//   every rank;
// - a rank that fails inside a step (out of memory) still launches every bucket it had not
//   launched (finish(), whatever its gradients hold) and then says so in the step's status sum:
//   every rank then discards the sums and replays the step (Trainer::train_step);
// - a rank with no samples in a step launches them all too;
// - synchronised BatchNorm sums inside forward and backward, once per BatchNorm layer and
//   micro-batch: it needs the same micro-batches on every rank, and no recovery inside a step.
#include <cstddef>
#include <vector>

#include <cnnengine/engine/core/communicator.hpp>
#include <cnnengine/engine/core/network.hpp>
#include <cnnengine/engine/core/parameter_store.hpp>

namespace cnn {

class GradientBuckets {
 public:
  // Buckets of `bucket_bytes` (the first one in the block less), a layer's gradients in one or more.
  GradientBuckets(const Network& network, const ParameterStore& params, Communicator& communicator,
                  std::size_t bucket_bytes);

  // A step's sums start afresh: nothing launched.
  void begin();
  // Node `node`'s parameter gradients are final for this step: launches the buckets now complete.
  void node_done(int node);
  // Launches every bucket not launched yet and waits for all: the gradient block holds the sums.
  void finish();

  int count() const { return static_cast<int>(buckets_.size()); }

 private:
  struct Bucket {
    Tensor range;     // floats of the gradient block (alignment padding too)
    int nodes = 0;    // layers with gradients in it
    int pending = 0;  // of them, not done in this step
  };
  struct NodeBuckets {
    int first = -1, last = -1;  // the buckets holding the node's gradients; -1: it has none
  };
  void launch_ready();
  void launch_next();

  Communicator& communicator_;
  std::vector<Bucket> buckets_;
  std::vector<NodeBuckets> node_buckets_;
  int launched_ = 0;  // buckets [0, launched_) started in this step
};

}  // namespace cnn
