#pragma once
// What a predictor keeps on the device beside the parameters: the loss's sums and the
// micro-batch's scalars at fixed addresses, and after them the loss's weights (a segmentation's
// class weights, a multi-label's positive weights) where it has any. The plan counts them
// (InferencePlanner).
#include <cstddef>

#include <cnnengine/engine/core/backend.hpp>
#include "engine/core/detail/loss_call.hpp"

namespace cnn {

struct ForwardSlots {
  LossSums sums;
  StepScalars scalars;
};

// The bytes of the slots and the weights after them.
inline std::size_t forward_slots_bytes(const LossOptions& loss) {
  return sizeof(ForwardSlots) + loss_weight_floats(loss) * sizeof(float);
}

// The weights' place, just after the slots (ForwardSlots's size is a multiple of its 8-byte
// alignment, so floats after it are aligned).
inline float* loss_weights(ForwardSlots* slots) { return reinterpret_cast<float*>(slots + 1); }

}  // namespace cnn
