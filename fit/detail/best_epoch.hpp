#pragma once
// Which of a run's epochs is the best by a watched metric: what keep_best keeps, early stopping
// waits on and the run's result names.
#include <optional>
#include <vector>

#include <cnnengine/fit/fit.hpp>

namespace cnn::detail {

bool lower_is_better(MonitoredMetric metric);

// The epoch of the best monitored value (the first of equals); epoch 0 where none measured it.
struct BestEpoch {
  int epoch = 0;
  std::optional<double> value;
};
BestEpoch best_epoch(const std::vector<EpochRecord>& epochs, MonitoredMetric metric);

}  // namespace cnn::detail
