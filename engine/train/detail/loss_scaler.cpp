#include "engine/train/detail/loss_scaler.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include <cnnengine/base/error.hpp>

namespace cnn {

void validate(const LossScaleOptions& o) {
  auto refuse = [](const std::string& what, double value, const char* rule) {
    throw ConfigError("loss scaling: " + what + " " + std::to_string(value) + " must be " + rule);
  };
  if (!std::isfinite(o.floor) || o.floor <= 0) refuse("the floor", o.floor, "a finite number above 0");
  if (!std::isfinite(o.initial) || o.initial < o.floor)
    refuse("the initial scale", o.initial, "finite and at least the floor");
  if (!std::isfinite(o.growth_factor) || o.growth_factor <= 1) refuse("the growth factor", o.growth_factor, "above 1");
  if (!std::isfinite(o.backoff_factor) || o.backoff_factor <= 0 || o.backoff_factor >= 1)
    refuse("the backoff factor", o.backoff_factor, "between 0 and 1");
  if (o.growth_interval < 1) refuse("the growth interval", static_cast<double>(o.growth_interval), "at least 1 step");
}

LossScaler::LossScaler(const LossScaleOptions& options) : options_(options), scale_(options.initial) {
  validate(options_);
}

void LossScaler::step_applied() {
  if (++steps_at_scale_ < options_.growth_interval) return;
  steps_at_scale_ = 0;
  const float grown = scale_ * options_.growth_factor;
  if (std::isfinite(grown)) scale_ = grown;
}

bool LossScaler::step_overflowed() {
  if (scale_ <= options_.floor) return false;  // diverged: left as it was
  steps_at_scale_ = 0;
  scale_ = std::max(options_.floor, scale_ * options_.backoff_factor);
  return true;
}

void LossScaler::restore(float scale, long steps_at_scale) {
  if (!std::isfinite(scale) || scale < options_.floor || steps_at_scale < 0)
    throw ConfigError("cannot continue with a loss scale of " + std::to_string(scale) + " after " +
                      std::to_string(steps_at_scale) + " steps: it must be finite and at least the floor, " +
                      std::to_string(options_.floor));
  scale_ = scale;
  // A count kept under a shorter growth interval (the run resumed with another): grow at the next
  // applied step.
  steps_at_scale_ = std::min(steps_at_scale, options_.growth_interval - 1);
}

}  // namespace cnn
