#pragma once
// The checks a host batch passes before the network runs on it, the same for a trainer and a
// predictor: its samples' shape where it says, its pointers, every pixel finite (a NaN would
// reach the weights through the gradients while the loss stays finite), every target one the
// network's task can take: a label or a mask's pixel one of its classes (or ignored), a
// multi-label's value 0 or 1, a regression's finite. A training step's batch also has the
// trainer's size and is this rank's share of it. Every check of a batch is here: the passes
// below only guard their own capacity (check_micro_batch).
#include <cstddef>
#include <string_view>

#include <cnnengine/base/batch.hpp>
#include <cnnengine/engine/core/network.hpp>

namespace cnn {

// `call` names the caller in the message. A batch that says what its samples are (Batch::channels,
// target_bytes) and is not the network's input (`input`, C x H x W) is a ShapeError, before
// anything is read; a batch on the device, or an empty one, is not read.
void check_batch_inputs(const Batch& batch, const Shape& input, const char* call);
void check_batch_labels(const Batch& batch, int classes);
// The batch's targets for `net`'s task (Network::task): its labels for a classification
// (check_batch_labels), its targets for the others.
void check_batch_targets(const Batch& batch, const Network& net);

// What a trainer's step takes: batches of `batch` samples (an epoch's last may be smaller), this
// rank's share of them where there are several, evenly shared under synchronised BatchNorm, and
// at least `need_samples` a rank for the network to train (`need_why` says why).
struct StepBatchContract {
  int batch = 0;
  bool data_parallel = false;
  int rank = 0, ranks = 1;
  bool even_shares = false;
  int need_samples = 1;
  std::string_view need_why;  // read only on a refusal: a step builds no string
};
// The step's size and share (ConfigError naming `call` and what to do), then its inputs and
// targets as above.
void check_step_batch(const Batch& batch, const StepBatchContract& contract, const Network& net, const char* call);

// A pass's guard of its own capacity: n samples (1 to `planned`) for a plan of `planned`.
void check_micro_batch(int n, int planned);

}  // namespace cnn
