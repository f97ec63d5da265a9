#include "fit/detail/plateau_schedule.hpp"

#include <cmath>
#include <iostream>
#include <optional>

#include "fit/detail/best_epoch.hpp"
#include "fit/detail/run_text.hpp"

namespace cnn::detail {

FitCallbacks PlateauSchedule::callbacks() {
  FitCallbacks c;
  c.on_epoch_end = [this](const EpochRecord&, FitControl& control) { epoch_end(control); };
  return c;
}

// The rule replayed over the run's epochs (so a resumed run needs no more state than the scale its
// trainer keeps): an epoch improves on the best when it is better by more than 1e-4 of it; after
// more than `patience` epochs without one, the rate is multiplied by `factor` and the count starts
// again. Applied when the last epoch is where the rule reduces.
void PlateauSchedule::epoch_end(FitControl& control) const {
  const std::vector<EpochRecord>& epochs = control.progress().epochs;
  if (epochs.empty()) return;
  const bool lower = lower_is_better(monitor_);
  std::optional<double> best;
  int without = 0;
  bool reduce = false;
  for (const EpochRecord& e : epochs) {
    const std::optional<double> value = monitored_value(monitor_, e);
    if (!value) continue;
    reduce = false;
    const double margin = 1e-4 * std::abs(best.value_or(0));
    if (!best || (lower ? *value < *best - margin : *value > *best + margin)) {
      best = value;
      without = 0;
    } else if (++without > schedule_.plateau_patience) {
      without = 0;
      reduce = true;
    }
  }
  if (!reduce || !monitored_value(monitor_, epochs.back())) return;
  Trainer& trainer = control.trainer();
  trainer.set_learning_rate_scale(trainer.learning_rate_scale() * schedule_.plateau_factor);
  if (announce_)
    std::cout << "plateau: no better " << to_string(monitor_) << " for "
              << plural(schedule_.plateau_patience + 1, "epoch") << "; the learning rate is now "
              << decimal(trainer.learning_rate()) << "\n";
}

}  // namespace cnn::detail
