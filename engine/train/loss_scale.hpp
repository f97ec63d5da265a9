#pragma once
// Dynamic loss scaling, the settings: what a trainer in fp16 does so that small gradients survive
// half's range (PyTorch's GradScaler, with its defaults; Keras's LossScaleOptimizer). The loss's
// gradient is multiplied by the scale before backward and every gradient divided by it after; a
// step whose gradients come out NaN or infinite is skipped (nothing applied) and the scale backs
// off; after growth_interval applied steps in a row it grows. bf16 has float's range and fp32
// needs none: they never scale.
namespace cnn {

struct LossScaleOptions {
  bool enabled = true;          // in fp16
  float initial = 65536.0f;     // 2^16
  float growth_factor = 2.0f;   // after growth_interval applied steps in a row
  float backoff_factor = 0.5f;  // after a step whose gradients overflowed
  long growth_interval = 2000;
  // A step that overflows at this scale stops the run (LossScaleAtFloor): its gradients are not
  // finite unscaled, so the training has diverged.
  float floor = 1.0f;
};

// Throws ConfigError naming the setting out of range: every number finite, floor > 0 and at most
// initial, growth_factor > 1, backoff_factor in (0, 1), growth_interval >= 1.
void validate(const LossScaleOptions& options);

}  // namespace cnn
