#pragma once
// What a predictor keeps on the device beside the parameters: the loss and accuracy sums and the
// micro-batch's scalars, at fixed addresses. The plan counts them (InferencePlanner).
#include "engine/core/backend.hpp"

namespace cnn {

struct ForwardSlots {
  float loss_sum = 0.0f;
  float correct = 0.0f;
  StepScalars scalars;
};

}  // namespace cnn
