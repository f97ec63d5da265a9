#pragma once
// The loss scale of a trainer in fp16 (engine/train/loss_scale.hpp): where it is, and how it
// moves after each step.
#include <cnnengine/engine/train/loss_scale.hpp>

namespace cnn {

class LossScaler {
 public:
  explicit LossScaler(const LossScaleOptions& options);  // validated

  float scale() const { return scale_; }
  // Applied steps in a row since the scale last moved.
  long steps_at_scale() const { return steps_at_scale_; }
  const LossScaleOptions& options() const { return options_; }
  // After a step whose gradients were finite: the scale grows after growth_interval in a row
  // (never to infinity).
  void step_applied();
  // After a step whose gradients overflowed: backs off, not below the floor. False, changing
  // nothing, where the scale was at the floor already (the run has diverged).
  bool step_overflowed();
  // A kept state (TrainerState): a scale at the floor or above, finite, or a ConfigError; a count
  // past the growth interval grows the scale at the next applied step.
  void restore(float scale, long steps_at_scale);

 private:
  LossScaleOptions options_;
  float scale_;
  long steps_at_scale_ = 0;
};

}  // namespace cnn
