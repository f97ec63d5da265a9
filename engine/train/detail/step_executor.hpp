#pragma once
// Runs one micro-batch through a plan: copy in, forward, loss, backward with the recomputations
// the plan puts in it, in the plan's order of operations. Knows nothing of where
// memory comes from (StepMemory) or which device runs the kernels (Backend).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/detail/input_stager.hpp"
#include <cnnengine/engine/core/parameter_store.hpp>
#include "engine/train/detail/gradient_buckets.hpp"
#include "engine/train/detail/step_memory.hpp"

namespace cnn {

// Where a micro-batch's results and scalars live: fixed device addresses, the trainer's.
struct StepSlots {
  float* sums;           // kLossSumFloats floats the loss adds to (LossSums)
  Tensor weights;        // the loss's class or positive weights; empty where it has none
  StepScalars* scalars;  // the micro-batch's StepScalars, copied in before its compute
  InputStager* input;    // how the micro-batch's input and scalars reach the step
  // Synchronised BatchNorm in a data-parallel run (the layers see it in LayerContext); null otherwise.
  const CrossRankContext* cross_rank = nullptr;
};

class StepExecutor {
 public:
  // capture: after the first run of a micro-batch size, record its compute (forward, loss and
  // backward) with the backend's capture and replay that instead of calling the layers (CUDA
  // graphs). Needs fixed addresses: planned step memory, fixed slots.
  StepExecutor(Network& network, Backend& backend, ParameterStore& params, const StepPlan& plan, StepMemory& memory,
               StepSlots slots, bool capture = false);

  // One micro-batch: `batch` holds its samples, and batch.first places them in the optimizer
  // step's batch (dropout's masks are keyed by that place). Adds the loss's sums to slots.sums
  // (the network's loss: run_loss). In training, parameter gradients
  // accumulate with the loss gradient scaled by grad_scale.
  // `seed` is the optimizer step's: the same for all its micro-batches. With `logits`, the
  // network's outputs (n x the output's elements floats) are copied there too; such a run is never recorded
  // (a copy to the host cannot be part of a graph). With `buckets` (a data-parallel step's last
  // micro-batch), each layer's gradients are handed to them as its backward finishes; such a
  // run is never recorded either (the sums are the communicator's calls, not the backend's).
  void run(const Batch& batch, float grad_scale, std::uint64_t seed, float* logits = nullptr,
           GradientBuckets* buckets = nullptr);

  long graph_replays() const { return replays_; }
  // Why capture stopped (the backend refused a call): empty while it works or was not asked for.
  const std::string& capture_failure() const { return capture_failure_; }
  // Runs eagerly from now on (another executor's capture failed).
  void stop_capturing() {
    capture_ = false;
    graphs_.clear();
  }

 private:
  // Forward, loss and backward of n samples already in the input, label and scalar slots; the
  // logits to `logits` where it is not null, each layer's gradients to `buckets` where it is not.
  void compute(int n, float* logits = nullptr, GradientBuckets* buckets = nullptr);
  // compute(n), or the replay of its recording, recording it on its second run.
  void compute_or_replay(int n);
  Tensor value(int node, int n) const;
  // The buffer that holds the node's output as backward reads it: its latest recomputed copy, if
  // any, else forward's.
  int backward_buffer(int node) const;
  // The node's output as a layer reads it, from forward's buffer or (after_loss) backward's. A
  // value stored in 16 bits is widened into the float32 copy `fp32` first, its 16-bit bits beside
  // it where the backend takes them, or comes as those bits alone where `as_stored` (the reading
  // layer's Layer::packed_values) and the backend takes them; where `read` is false the layer gets
  // its shape alone (no data).
  Tensor readable(int node, int n, bool after_loss, int fp32, bool read, bool as_stored);
  Tensor gradient(int node, int n) const;
  Tensor buffer(int index, Shape shape) const;
  // The node's batch of n, channels last where the step keeps its images so (Note [Channels-last
  // images], tensor.hpp; StepPlan::images_channels_last).
  Shape batched(int node, int n) const;

  struct Recording {
    int batch;
    std::unique_ptr<CapturedCalls> calls;
  };
  static constexpr std::size_t kMaxRecordings = 4;  // the full micro-batch, the last one or two, ... then eager

  Network& net_;
  Backend& backend_;
  ParameterStore& params_;
  const StepPlan& plan_;
  StepMemory& memory_;
  StepSlots slots_;
  bool capture_;
  // The plan stores the values in the 16-bit format of a backend that takes them as they are
  // stored (StepPlan::packed_values, Backend::takes_packed_values).
  bool packed_values_;
  // The images lie channels last (StepPlan::channels_last), but for synchronised BatchNorm, whose
  // calls read NCHW: a data-parallel step with it keeps NCHW, within the same buffers (its
  // convolutions take the fastest algorithms that fit the workspaces planned for channels last).
  bool channels_last_;
  std::vector<Tensor> inputs_, grad_inputs_, saved_;
  // A layer's accumulate flags, copied out of the plan's std::vector<bool> (not contiguous):
  // as many as the layer with the most inputs has.
  std::unique_ptr<bool[]> accumulate_;
  std::vector<int> copies_;   // by node during backward: the time of its latest recomputation, -1: none
  std::vector<int> ran_once_;  // micro-batch sizes run eagerly once: the next run records
  std::vector<Recording> graphs_;
  long replays_ = 0;
  std::string capture_failure_;
};

}  // namespace cnn
