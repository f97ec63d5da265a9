#include "fit/detail/early_stopping.hpp"

#include <iostream>

#include "fit/detail/best_epoch.hpp"
#include "fit/detail/run_text.hpp"

namespace cnn::detail {

FitCallbacks EarlyStopping::callbacks() {
  FitCallbacks c;
  c.on_run_begin = [this](FitControl& control) { check(control.progress().epoch, control); };
  c.on_epoch_end = [this](const EpochRecord& e, FitControl& control) { check(e.epoch + 1, control); };
  return c;
}

void EarlyStopping::check(int next_epoch, FitControl& control) {
  const RunProgress& progress = control.progress();
  // A stop a user's callback asked for stays the run's reason.
  if (control.stopping() || next_epoch > control.epochs() || progress.epochs.empty()) return;
  const BestEpoch best = best_epoch(progress.epochs, monitor_);
  if (best.epoch == 0) return;
  const int last = progress.epochs.back().epoch;
  if (last - best.epoch < patience_) return;
  const std::string why = "early stop: no better " + to_string(monitor_) + " for " +
                          plural(last - best.epoch, "epoch") + " (the best, " + fixed(*best.value) + ", at epoch " +
                          std::to_string(best.epoch) + ")";
  if (announce_) std::cout << why << "\n";
  stopped_ = true;
  control.stop(why);
}

}  // namespace cnn::detail
