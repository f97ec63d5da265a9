#pragma once
// The errors that end a training run because its loss or gradients stopped being numbers: thrown
// before the step is applied, so that the parameters and optimizer state are those of the step
// before.
#include <string>

#include <cnnengine/base/error.hpp>
#include <cnnengine/engine/core/backend_types.hpp>

namespace cnn {

// A step whose loss is NaN or infinite. Thrown before the optimizer step: the parameters and
// the optimizer state are as they were before the step. In fp16 the message names half's range,
// the likelier cause there than the learning rate.
class TrainingDiverged : public Error {
 public:
  TrainingDiverged(long step, double loss, Precision precision = Precision::fp32);
  // The same divergence, with what the caller adds to its message ("; run.ckpt holds step 40").
  TrainingDiverged(const TrainingDiverged& diverged, const std::string& more);
  long step() const { return step_; }
  double loss() const { return loss_; }

 protected:
  TrainingDiverged(long step, double loss, const std::string& message);

 private:
  long step_;
  double loss_;
};

// A step in fp16 whose gradients are NaN or infinite at the loss scale's floor
// (LossScaleOptions::floor): they are so unscaled, and the run has diverged. Thrown before the
// optimizer step, changing nothing, as TrainingDiverged.
class LossScaleAtFloor : public TrainingDiverged {
 public:
  LossScaleAtFloor(long step, double loss, float floor);
};

}  // namespace cnn
