#include <cnnengine/base/task.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include <cnnengine/base/error.hpp>

namespace cnn {
namespace {

std::string list(const std::vector<float>& v) {
  std::string s;
  for (float x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

void check_weights(const std::vector<float>& weights, int outputs, const char* option, bool zero_allowed,
                   bool applies) {
  if (weights.empty()) return;
  if (!applies) throw ConfigError(std::string(option) + " applies to another task");
  if (static_cast<int>(weights.size()) != outputs)
    throw ConfigError(std::string(option) + " holds " + std::to_string(weights.size()) + " values (" + list(weights) +
                      ") for " + std::to_string(outputs) + " classes: give one a class");
  for (float w : weights)
    if (!std::isfinite(w) || w < 0 || (!zero_allowed && w == 0))
      throw ConfigError(std::string(option) + " value " + std::to_string(w) + " is not a finite number " +
                        (zero_allowed ? ">= 0" : "> 0"));
}

}  // namespace

std::string to_string(Task task) {
  switch (task) {
    case Task::classify: return "classify";
    case Task::segment: return "segment";
    case Task::multilabel: return "multilabel";
    case Task::regress: return "regress";
  }
  return "classify";
}

Task parse_task(std::string_view word) {
  for (Task t : {Task::classify, Task::segment, Task::multilabel, Task::regress})
    if (word == to_string(t)) return t;
  throw ConfigError("unknown task '" + std::string(word) + "': use classify, segment, multilabel or regress");
}

std::string to_string(RegressionLoss loss) { return loss == RegressionLoss::huber ? "huber" : "mse"; }

RegressionLoss parse_regression_loss(std::string_view word) {
  if (word == "mse") return RegressionLoss::mse;
  if (word == "huber") return RegressionLoss::huber;
  throw ConfigError("unknown regression loss '" + std::string(word) + "': use mse or huber");
}

void check_loss_options(const LossOptions& o, int outputs) {
  if (outputs <= 0) throw ConfigError("a task of " + std::to_string(outputs) + " outputs");
  if (o.task == Task::segment && outputs > kMaxSegmentationClasses)
    throw ConfigError("a segmentation of " + std::to_string(outputs) + " classes: a mask's byte holds at most " +
                      std::to_string(kMaxSegmentationClasses) + " (255 is the ignored value)");
  if (!(o.label_smoothing >= 0 && o.label_smoothing < 1))
    throw ConfigError("label smoothing " + std::to_string(o.label_smoothing) + " is not in [0, 1)");
  if (o.label_smoothing != 0 && o.task != Task::classify)
    throw ConfigError("label smoothing applies to classification, not to " + to_string(o.task));
  check_weights(o.class_weights, outputs, "class weights", true, o.task == Task::segment);
  if (!o.class_weights.empty() && std::all_of(o.class_weights.begin(), o.class_weights.end(),
                                              [](float w) { return w == 0; }))
    throw ConfigError("class weights: every one is 0, so no pixel would count in the loss: nothing to learn");
  check_weights(o.positive_weights, outputs, "positive weights", false, o.task == Task::multilabel);
  if (!(std::isfinite(o.huber_delta) && o.huber_delta > 0))
    throw ConfigError("Huber delta " + std::to_string(o.huber_delta) + " is not a finite number > 0");
  if (!(o.threshold > 0 && o.threshold < 1))
    throw ConfigError("threshold " + std::to_string(o.threshold) + " is not between 0 and 1");
}

std::size_t target_bytes(Task task, int outputs, int height, int width) {
  switch (task) {
    case Task::classify: return sizeof(std::int32_t);
    case Task::segment: return static_cast<std::size_t>(height) * static_cast<std::size_t>(width);
    case Task::multilabel:
    case Task::regress: return static_cast<std::size_t>(outputs) * sizeof(float);
  }
  return sizeof(std::int32_t);
}

}  // namespace cnn
