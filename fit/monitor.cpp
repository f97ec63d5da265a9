// The metrics a run may watch to keep its best model and to stop early.
#include <cnnengine/base/error.hpp>
#include <cnnengine/engine/core/task_scores.hpp>
#include <cnnengine/fit/fit.hpp>

namespace cnn {
namespace {

// The task scores a run may watch: their metric and their name in headline_scores.
struct WatchedScore {
  MonitoredMetric metric;
  const char* name;
};
constexpr WatchedScore kScores[] = {
    {MonitoredMetric::validation_pixel_accuracy, "pixel_accuracy"},
    {MonitoredMetric::validation_mean_iou, "mean_iou"},
    {MonitoredMetric::validation_mean_f1, "mean_f1"},
    {MonitoredMetric::validation_mean_average_precision, "mean_average_precision"},
    {MonitoredMetric::validation_mae, "mae"},
    {MonitoredMetric::validation_rmse, "rmse"},
};

const char* score_name(MonitoredMetric metric) {
  for (const WatchedScore& s : kScores)
    if (s.metric == metric) return s.name;
  return nullptr;
}

}  // namespace

MonitoredMetric parse_monitored_metric(std::string_view word) {
  if (word == "val_loss") return MonitoredMetric::validation_loss;
  if (word == "val_accuracy") return MonitoredMetric::validation_accuracy;
  if (word == "loss" || word == "train_loss") return MonitoredMetric::train_loss;
  if (word == "accuracy" || word == "train_accuracy") return MonitoredMetric::train_accuracy;
  for (const WatchedScore& s : kScores)
    if (word == "val_" + std::string(s.name)) return s.metric;
  if (word.rfind("test", 0) == 0)
    throw OptionError("monitor",
                      "cannot watch '" + std::string(word) +
                          "': the test set is never used to choose a model (its score would be biased); watch "
                          "val_loss or val_accuracy, with a validation split or a val/ folder");
  throw OptionError(
      "monitor",
      "unknown metric to watch '" + std::string(word) +
          "': expected val_loss, val_accuracy, train_loss or train_accuracy, or a task's val_pixel_accuracy, "
          "val_mean_iou, val_mean_f1, val_mean_average_precision, val_mae or val_rmse");
}

void check_monitored_metric(MonitoredMetric metric, Task task) {
  const char* name = score_name(metric);
  if (!name) return;  // the loss and the accuracy: every task has them
  TaskScores scores;
  scores.task = task;
  std::string offered = "val_loss";
  for (const auto& [score, value] : headline_scores(scores)) {
    if (score == name) return;
    offered += ", val_" + score;
  }
  if (task != Task::regress) offered += ", val_accuracy";
  static const char* const kDoes[] = {"classifies", "segments", "tags labels", "regresses"};
  throw OptionError("monitor", "cannot watch " + to_string(metric) + ": a network that " +
                                   kDoes[static_cast<int>(task)] + " is scored by " + offered);
}

std::string to_string(MonitoredMetric metric) {
  switch (metric) {
    case MonitoredMetric::validation_loss: return "val_loss";
    case MonitoredMetric::validation_accuracy: return "val_accuracy";
    case MonitoredMetric::train_loss: return "train_loss";
    case MonitoredMetric::train_accuracy: return "train_accuracy";
    default: return "val_" + std::string(score_name(metric));
  }
}

bool watches_validation(MonitoredMetric metric) {
  return metric != MonitoredMetric::train_loss && metric != MonitoredMetric::train_accuracy;
}

std::optional<double> monitored_value(MonitoredMetric metric, const EpochRecord& epoch) {
  switch (metric) {
    case MonitoredMetric::validation_loss: return epoch.validation_loss;
    case MonitoredMetric::validation_accuracy: return epoch.validation_accuracy;
    case MonitoredMetric::train_loss: return epoch.train_loss;
    case MonitoredMetric::train_accuracy: return epoch.train_accuracy;
    default: {
      const auto found = epoch.validation_scores.find(score_name(metric));
      if (found == epoch.validation_scores.end()) return std::nullopt;
      return found->second;
    }
  }
}

}  // namespace cnn
