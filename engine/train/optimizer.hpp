#pragma once
// Optimizers and learning-rate schedules. An optimizer step is one fused backend call over the
// flat parameter block.
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <cnnengine/engine/core/parameter_store.hpp>

namespace cnn {

enum class OptimizerKind { sgd, adamw };
// "sgd" or "adamw"; anything else is a ConfigError naming them.
OptimizerKind parse_optimizer_kind(std::string_view word);
std::string to_string(OptimizerKind kind);

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::adamw;
  float learning_rate = 1e-3f;
  std::optional<float> weight_decay;  // none: the optimizer's default (SGD 0, AdamW 0.01)
  float momentum = 0.9f;       // SGD
  bool nesterov = false;       // SGD
  float beta1 = 0.9f, beta2 = 0.999f, epsilon = 1e-8f;  // AdamW
  // Fine-tuning, as PyTorch's parameter groups: the parameters of nodes 1 to `backbone_through`
  // step at the learning rate times `backbone_rate_scale` (weight decay too, as AdamW's decoupled
  // decay is times the rate), the others at the rate. 0: every parameter at the rate.
  int backbone_through = 0;
  float backbone_rate_scale = 1;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual int state_slots() const = 0;  // floats of state per parameter
  // Optimizer step `step` (1 for the first): AdamW's bias correction counts them. The optimizer
  // keeps no count of its own, so a run resumed from a checkpoint continues exactly. `guard`:
  // the step's loss sum in the backend's memory, or null (Backend::sgd_update).
  virtual void step(Backend& backend, ParameterStore& params, float learning_rate, long step,
                    const float* guard) = 0;
  virtual std::string describe() const = 0;
};

// Throws ConfigError naming the setting that is out of range
// (every number finite; learning rate and epsilon positive, weight decay not negative,
// momentum and betas in [0, 1)).
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config);

// plateau: the base rate, which a run (Fit) multiplies by plateau_factor each time its watched
// metric stops improving for plateau_patience epochs; a Trainer alone keeps it constant.
enum class ScheduleKind { constant, step, cosine, onecycle, plateau };
// "constant", "step", "cosine", "onecycle" or "plateau"; anything else is a ConfigError naming them.
ScheduleKind parse_schedule_kind(std::string_view word);
std::string to_string(ScheduleKind kind);

struct ScheduleConfig {
  ScheduleKind kind = ScheduleKind::cosine;
  long warmup_steps = 0;        // linear warm-up from 0 to the base rate
  long step_every = 0;          // "step": multiply by `gamma` every this many steps
  float gamma = 0.1f;
  float final_fraction = 0.0f;  // "cosine": the rate at the end, as a fraction of the base
  // "onecycle" (PyTorch's OneCycleLR, cosine annealing): from base / div_factor up to the base
  // over the first start_fraction of the run, then down to base / (div_factor x final_div_factor).
  float onecycle_start_fraction = 0.3f, onecycle_div_factor = 25.0f, onecycle_final_div_factor = 1e4f;
  // "plateau" (PyTorch's ReduceLROnPlateau): the factor, and the epochs without an improvement
  // (relative, 1e-4) before it applies.
  float plateau_factor = 0.1f;
  int plateau_patience = 10;
};

// The learning rate at optimizer step `step` (0-based) of `total_steps`. Cosine and one-cycle
// follow total_steps; with none given (0) they keep the base rate after the warm-up: a run of
// unknown length never has its rate dropped to 0 after one step.
float scheduled_rate(const ScheduleConfig& schedule, float base_rate, long step, long total_steps);
void validate(const ScheduleConfig& schedule);

}  // namespace cnn
