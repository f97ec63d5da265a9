#pragma once
// The checks a host batch passes before the network runs on it, the same for a trainer and a
// predictor: its samples' shape where it says, its pointers, every pixel finite (a NaN would
// reach the weights through the gradients while the loss stays finite), every target one the
// network's task can take: a label or a mask's pixel one of its classes (or ignored), a
// multi-label's value 0 or 1, a regression's finite.
#include <cstddef>

#include "base/batch.hpp"
#include "engine/core/network.hpp"

namespace cnn {

// `call` names the caller in the message. A batch that says what its samples are (Batch::channels,
// target_bytes) and is not the network's input (`input`, C x H x W) is a ShapeError, before
// anything is read; a batch on the device, or an empty one, is not read.
void check_batch_inputs(const Batch& batch, const Shape& input, const char* call);
void check_batch_labels(const Batch& batch, int classes);
// The batch's targets for `net`'s task (Network::task): its labels for a classification
// (check_batch_labels), its targets for the others.
void check_batch_targets(const Batch& batch, const Network& net);

}  // namespace cnn
