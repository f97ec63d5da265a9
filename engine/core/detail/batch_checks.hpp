#pragma once
// The checks a host batch passes before the network runs on it, the same for a trainer and a
// predictor: its pointers, every pixel finite (a NaN would reach the weights through the
// gradients while the loss stays finite), every label one of the network's classes.
#include <cstddef>

#include "base/batch.hpp"

namespace cnn {

// `call` names the caller in the message. A batch on the device, or an empty one, is not read.
void check_batch_inputs(const Batch& batch, std::size_t sample_floats, const char* call);
void check_batch_labels(const Batch& batch, int classes);

}  // namespace cnn
