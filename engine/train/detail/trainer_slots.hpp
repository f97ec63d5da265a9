#pragma once
// What the trainer keeps on the device beside the parameter store: the loss's sums and the
// micro-batch's scalars, at fixed addresses (a recorded step reads them there), then the loss's
// weights where it has any. The planner counts its bytes among the persistent ones.
#include <cstddef>

#include <cnnengine/base/task.hpp>
#include "engine/core/detail/loss_call.hpp"

namespace cnn {

struct TrainerSlots {
  LossSums sums;
  StepScalars scalars;
  float gradients_not_finite;  // fp16's loss scaling (Backend::unscale_gradients)
};
// The sums are zeroed and read back as adjacent floats at the block's start.
static_assert(offsetof(TrainerSlots, sums) == 0 && sizeof(LossSums) == kLossSumFloats * sizeof(float));

inline std::size_t trainer_slots_bytes(const LossOptions& loss) {
  return sizeof(TrainerSlots) + loss_weight_floats(loss) * sizeof(float);
}
inline float* loss_weights(TrainerSlots* slots) { return reinterpret_cast<float*>(slots + 1); }

}  // namespace cnn
