// The metrics a run may watch to keep its best model and to stop early.
#include "base/error.hpp"
#include "fit/fit.hpp"

namespace cnn {

MonitoredMetric parse_monitored_metric(std::string_view word) {
  if (word == "val_loss") return MonitoredMetric::validation_loss;
  if (word == "val_accuracy") return MonitoredMetric::validation_accuracy;
  if (word == "loss" || word == "train_loss") return MonitoredMetric::train_loss;
  if (word == "accuracy" || word == "train_accuracy") return MonitoredMetric::train_accuracy;
  if (word.rfind("test", 0) == 0)
    throw ConfigError("cannot watch '" + std::string(word) +
                      "': the test set is never used to choose a model (its score would be biased); watch "
                      "val_loss or val_accuracy, with a validation split or a val/ folder");
  throw ConfigError("unknown metric to watch '" + std::string(word) +
                    "': expected val_loss, val_accuracy, train_loss or train_accuracy");
}

std::string to_string(MonitoredMetric metric) {
  switch (metric) {
    case MonitoredMetric::validation_loss: return "val_loss";
    case MonitoredMetric::validation_accuracy: return "val_accuracy";
    case MonitoredMetric::train_loss: return "train_loss";
    case MonitoredMetric::train_accuracy: return "train_accuracy";
  }
  return "?";
}

std::optional<double> monitored_value(MonitoredMetric metric, const EpochRecord& epoch) {
  switch (metric) {
    case MonitoredMetric::validation_loss: return epoch.validation_loss;
    case MonitoredMetric::validation_accuracy: return epoch.validation_accuracy;
    case MonitoredMetric::train_loss: return epoch.train_loss;
    case MonitoredMetric::train_accuracy: return epoch.train_accuracy;
  }
  return std::nullopt;
}

}  // namespace cnn
