#include <cnnengine/engine/train/optimizer.hpp>

#include <algorithm>
#include <cmath>
#include <array>
#include <stdexcept>

#include <cnnengine/base/error.hpp>
#include <cnnengine/engine/core/backend.hpp>

namespace cnn {
namespace {

// The parameter groups: the backbone's floats (nodes 1 to backbone_through), first in the trained
// block, at its scaled rate, and the rest at the rate; one group where nothing is scaled.
struct GroupRates {
  explicit GroupRates(const OptimizerConfig& c) : through(c.backbone_through), scale(c.backbone_rate_scale) {}
  std::size_t backbone_floats(const ParameterStore& params) const {
    return through > 0 && scale != 1 ? params.trained_floats_before(through + 1) : 0;
  }
  int through;
  float scale;
};
struct Group {
  std::size_t first = 0, count = 0;
  float rate = 0;
};
// At most two, on the stack: a step allocates nothing.
struct Groups {
  std::array<Group, 2> group;
  std::size_t count = 0;
  const Group* begin() const { return group.data(); }
  const Group* end() const { return group.data() + count; }
};
Groups groups(const ParameterStore& params, const GroupRates& r, float lr) {
  const std::size_t all = params.trained().elements();
  const std::size_t split = r.backbone_floats(params);
  Groups g;
  if (split > 0) g.group[g.count++] = {0, split, lr * r.scale};
  if (split < all) g.group[g.count++] = {split, all - split, lr};
  return g;
}
Tensor part(const Tensor& block, const Group& g) {
  return Tensor{block.data + g.first, Shape{static_cast<int>(g.count)}};
}

class Sgd final : public Optimizer {
 public:
  explicit Sgd(const OptimizerConfig& c) : groups_(c) {
    config_.momentum = c.momentum;
    config_.nesterov = c.nesterov;
    config_.weight_decay = c.weight_decay.value_or(0.f);
    if (config_.nesterov && config_.momentum <= 0.f) throw ConfigError("sgd: Nesterov needs a positive momentum");
  }
  int state_slots() const override { return config_.momentum != 0.f ? 1 : 0; }
  void step(Backend& backend, ParameterStore& params, float lr, long /*step*/, const float* guard) override {
    for (const Group& g : groups(params, groups_, lr))
      backend.sgd_update(part(params.trained(), g), part(params.gradients(), g),
                         state_slots() ? part(params.optimizer_slot(0), g) : Tensor{}, config_, g.rate, guard);
  }
  std::string describe() const override {
    return std::string("sgd (momentum ") + std::to_string(config_.momentum).substr(0, 4) +
           (config_.nesterov ? ", nesterov" : "") + ", weight decay " + std::to_string(config_.weight_decay) + ")";
  }

 private:
  SgdConfig config_;
  GroupRates groups_;
};

class AdamW final : public Optimizer {
 public:
  explicit AdamW(const OptimizerConfig& c) : groups_(c) {
    config_.beta1 = c.beta1;
    config_.beta2 = c.beta2;
    config_.epsilon = c.epsilon;
    config_.weight_decay = c.weight_decay.value_or(0.01f);
  }
  int state_slots() const override { return 2; }
  void step(Backend& backend, ParameterStore& params, float lr, long step, const float* guard) override {
    for (const Group& g : groups(params, groups_, lr))
      backend.adamw_update(part(params.trained(), g), part(params.gradients(), g), part(params.optimizer_slot(0), g),
                           part(params.optimizer_slot(1), g), config_, g.rate, step, guard);
  }
  std::string describe() const override {
    return "adamw (betas " + std::to_string(config_.beta1).substr(0, 5) + ", " + std::to_string(config_.beta2).substr(0, 5) +
           ", weight decay " + std::to_string(config_.weight_decay) + ")";
  }

 private:
  AdamWConfig config_;
  GroupRates groups_;
};

void check_range(const char* name, float value, bool positive, bool below_one = false) {
  const bool ok = std::isfinite(value) && (positive ? value > 0.f : value >= 0.f) && (!below_one || value < 1.f);
  if (!ok)
    throw ConfigError(std::string(name) + " must be " + (positive ? "positive" : "at least 0") +
                      (below_one ? " and below 1" : " and finite") + ", got " + std::to_string(value));
}

void validate(const OptimizerConfig& c) {
  check_range("learning rate", c.learning_rate, true);
  check_range("backbone rate scale", c.backbone_rate_scale, true);
  if (c.backbone_through < 0) throw ConfigError("the backbone's last node must be 0 (none) or more");
  if (c.weight_decay) check_range("weight decay", *c.weight_decay, false);
  check_range("momentum", c.momentum, false, true);
  check_range("beta1", c.beta1, false, true);
  check_range("beta2", c.beta2, false, true);
  check_range("epsilon", c.epsilon, true);
}

}  // namespace

OptimizerKind parse_optimizer_kind(std::string_view word) {
  for (OptimizerKind kind : {OptimizerKind::sgd, OptimizerKind::adamw})
    if (word == to_string(kind)) return kind;
  throw ConfigError("unknown optimizer '" + std::string(word) + "': use sgd or adamw");
}

std::string to_string(OptimizerKind kind) { return kind == OptimizerKind::sgd ? "sgd" : "adamw"; }

ScheduleKind parse_schedule_kind(std::string_view word) {
  for (ScheduleKind kind : {ScheduleKind::constant, ScheduleKind::step, ScheduleKind::cosine, ScheduleKind::onecycle,
                            ScheduleKind::plateau})
    if (word == to_string(kind)) return kind;
  throw ConfigError("unknown schedule '" + std::string(word) + "': use constant, step, cosine, onecycle or plateau");
}

std::string to_string(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::constant: return "constant";
    case ScheduleKind::step: return "step";
    case ScheduleKind::cosine: return "cosine";
    case ScheduleKind::onecycle: return "onecycle";
    case ScheduleKind::plateau: return "plateau";
  }
  return "constant";
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config) {
  validate(config);
  if (config.kind == OptimizerKind::sgd) return std::make_unique<Sgd>(config);
  return std::make_unique<AdamW>(config);
}

void validate(const ScheduleConfig& s) {
  if (s.kind == ScheduleKind::step && s.step_every <= 0) throw ConfigError("step schedule: step_every must be positive");
  if (s.warmup_steps < 0) throw ConfigError("warm-up steps must not be negative");
  if (!(std::isfinite(s.gamma) && s.gamma > 0.f)) throw ConfigError("step schedule: gamma must be positive");
  if (!(s.final_fraction >= 0.f && s.final_fraction <= 1.f))
    throw ConfigError("cosine schedule: the final fraction must be in [0, 1]");
  if (s.kind == ScheduleKind::onecycle) {
    if (s.warmup_steps > 0)
      throw ConfigError("the onecycle schedule warms up by itself (its first " +
                        std::to_string(static_cast<int>(s.onecycle_start_fraction * 100)) + "%): no warm-up steps");
    if (!(s.onecycle_start_fraction > 0.f && s.onecycle_start_fraction < 1.f) || !(s.onecycle_div_factor >= 1.f) ||
        !(s.onecycle_final_div_factor >= 1.f) || !std::isfinite(s.onecycle_div_factor) ||
        !std::isfinite(s.onecycle_final_div_factor))
      throw ConfigError("onecycle schedule: the start fraction must be in (0, 1) and the division factors finite and at "
                        "least 1");
  }
  if (s.kind == ScheduleKind::plateau && (!(s.plateau_factor > 0.f && s.plateau_factor < 1.f) || s.plateau_patience < 0))
    throw ConfigError("plateau schedule: the factor must be in (0, 1) and the patience 0 or more epochs");
}

namespace {

// PyTorch's _annealing_cos: from `start` at pct 0 to `end` at pct 1.
double cosine_between(double start, double end, double pct) {
  return end + (start - end) / 2.0 * (std::cos(3.14159265358979 * std::clamp(pct, 0.0, 1.0)) + 1.0);
}

// PyTorch's OneCycleLR (two phases): step 0 at base / div, step start_fraction x total - 1 at the
// base, the last step (total - 1) at base / (div x final_div).
float one_cycle_rate(const ScheduleConfig& s, float base, long step, long total) {
  const double initial = base / s.onecycle_div_factor, lowest = initial / s.onecycle_final_div_factor;
  const double peak_step = static_cast<double>(s.onecycle_start_fraction) * static_cast<double>(total) - 1.0;
  const double t = static_cast<double>(step);
  if (t <= peak_step) return static_cast<float>(cosine_between(initial, base, peak_step > 0 ? t / peak_step : 1.0));
  const double span = static_cast<double>(total - 1) - peak_step;
  return static_cast<float>(cosine_between(base, lowest, span > 0 ? (t - peak_step) / span : 1.0));
}

}  // namespace

float scheduled_rate(const ScheduleConfig& s, float base, long step, long total) {
  if (s.kind == ScheduleKind::onecycle) return total > 0 ? one_cycle_rate(s, base, step, total) : base;
  if (step < s.warmup_steps) return base * static_cast<float>(step + 1) / static_cast<float>(s.warmup_steps);
  if (s.kind == ScheduleKind::cosine && total <= 0) return base;  // no horizon to decay over
  const long after = step - s.warmup_steps;
  const long span = std::max<long>(total - s.warmup_steps, 1);
  if (s.kind == ScheduleKind::step) return base * std::pow(s.gamma, static_cast<float>(after / s.step_every));
  if (s.kind == ScheduleKind::cosine) {
    const double progress = std::min(1.0, static_cast<double>(after) / static_cast<double>(span));
    const double cosine = 0.5 * (1.0 + std::cos(3.14159265358979 * progress));
    return base * static_cast<float>(s.final_fraction + (1.0 - s.final_fraction) * cosine);
  }
  return base;
}

}  // namespace cnn
