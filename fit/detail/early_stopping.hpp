#pragma once
// Early stopping (FitOptions::early_stop N; Keras's EarlyStopping): once N epochs have passed
// without a better monitored value, the run stops after the epoch's saves. A callback over the
// run's events (FitCallbacks), on every rank. A resumed run whose epochs already say so stops
// before training.
#include <string>

#include <cnnengine/fit/fit.hpp>

namespace cnn::detail {

class EarlyStopping {
 public:
  // `announce`: the reason on stdout when it stops the run.
  EarlyStopping(int patience, MonitoredMetric monitor, bool announce)
      : patience_(patience), monitor_(monitor), announce_(announce) {}

  // Its events, bound to this rule: it must outlive the run.
  FitCallbacks callbacks();
  // Whether it stopped the run (FitControl::stop, with its reason).
  bool stopped() const { return stopped_; }

 private:
  // Stops the run where it is due and `next_epoch` is one of the run's (none to skip after the last).
  void check(int next_epoch, FitControl& control);

  int patience_;
  MonitoredMetric monitor_;
  bool announce_;
  bool stopped_ = false;
};

}  // namespace cnn::detail
