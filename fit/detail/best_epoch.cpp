#include "fit/detail/best_epoch.hpp"

namespace cnn::detail {

bool lower_is_better(MonitoredMetric metric) {
  return metric == MonitoredMetric::validation_loss || metric == MonitoredMetric::train_loss ||
         metric == MonitoredMetric::validation_mae || metric == MonitoredMetric::validation_rmse;
}

BestEpoch best_epoch(const std::vector<EpochRecord>& epochs, MonitoredMetric metric) {
  BestEpoch best;
  const bool lower = lower_is_better(metric);
  for (const EpochRecord& e : epochs) {
    const std::optional<double> value = monitored_value(metric, e);
    if (value && (!best.value || (lower ? *value < *best.value : *value > *best.value))) {
      best.value = value;
      best.epoch = e.epoch;
    }
  }
  return best;
}

}  // namespace cnn::detail
