#pragma once
// The plateau schedule (ScheduleKind::plateau; PyTorch's ReduceLROnPlateau): at an epoch's end,
// before its saves, the rate is multiplied by the schedule's factor after more than `patience`
// epochs without a better monitored value. A callback over the run's events (FitCallbacks), on
// every rank: it changes the trainer's learning-rate scale, which checkpoints keep.
#include <cnnengine/fit/fit.hpp>

namespace cnn::detail {

class PlateauSchedule {
 public:
  // `announce`: a line on stdout at each reduction.
  PlateauSchedule(const ScheduleConfig& schedule, MonitoredMetric monitor, bool announce)
      : schedule_(schedule), monitor_(monitor), announce_(announce) {}

  // Its events, bound to this schedule: it must outlive the run.
  FitCallbacks callbacks();

 private:
  void epoch_end(FitControl& control) const;

  ScheduleConfig schedule_;
  MonitoredMetric monitor_;
  bool announce_;
};

}  // namespace cnn::detail
