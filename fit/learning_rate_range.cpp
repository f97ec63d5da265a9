// The learning-rate range test, as a short Fit whose callback raises the rate each step.
#include <cmath>
#include <limits>

#include <cnnengine/base/error.hpp>
#include <cnnengine/fit/fit.hpp>

namespace cnn {
namespace {

// The step's rate: start x (end / start)^(i / (steps - 1)).
float rate_at(const LearningRateRangeOptions& r, int i) {
  const double share = r.steps > 1 ? static_cast<double>(i) / static_cast<double>(r.steps - 1) : 0.0;
  return static_cast<float>(r.start * std::pow(static_cast<double>(r.end) / r.start, share));
}

// The rate where the smoothed loss falls fastest against log(rate): a central difference over
// the points, the first and last tenth left out (the start is noise, the end divergence).
float steepest_descent(const LearningRateRange& range) {
  const std::size_t n = range.losses.size();
  if (n < 5) return n ? range.rates[n / 2] : 0.0f;
  const std::size_t from = std::max<std::size_t>(1, n / 10), to = n - std::max<std::size_t>(1, n / 10);
  double steepest = std::numeric_limits<double>::infinity();
  float at = range.rates[n / 2];
  for (std::size_t i = from; i < to && i + 1 < n; ++i) {
    const double slope = (range.losses[i + 1] - range.losses[i - 1]) /
                         (std::log(range.rates[i + 1]) - std::log(range.rates[i - 1]));
    if (slope < steepest) {
      steepest = slope;
      at = range.rates[i];
    }
  }
  return at;
}

}  // namespace

LearningRateRange find_learning_rate(Network& network, Backend& backend, const data::Dataset& training,
                                     FitOptions options, const LearningRateRangeOptions& r) {
  if (!(r.start > 0 && r.end > r.start && std::isfinite(r.end)) || r.steps < 2 ||
      !(r.smoothing >= 0 && r.smoothing < 1) || !(r.divergence > 1))
    throw ConfigError("the learning-rate range test needs 0 < start < end, finite, 2 steps or more, a smoothing in "
                      "[0, 1) and a divergence factor above 1");
  options.optimizer.learning_rate = r.start;
  options.schedule = ScheduleConfig{};
  options.schedule.kind = ScheduleKind::constant;
  options.total_steps = r.steps;
  options.warmup_epochs = options.step_every_epochs = 0;
  options.validation_split = 0;
  options.monitor = MonitoredMetric::train_loss;
  options.keep_best = false;
  options.early_stop = 0;
  options.test_each_epoch = false;
  options.save.clear();
  options.save_every = 0;
  options.resume.clear();
  options.metrics.clear();
  options.model.reset();
  options.progress = false;
  options.epochs = std::numeric_limits<int>::max() / 2;  // it ends by its steps

  LearningRateRange range;
  double average = 0, lowest = std::numeric_limits<double>::infinity();
  int step = 0;
  options.callbacks = {};
  options.callbacks.on_step = [&](const StepReport& report, FitControl& control) {
    ++step;
    average = r.smoothing * average + (1 - r.smoothing) * report.loss;
    const double smoothed = average / (1 - std::pow(r.smoothing, step));
    range.rates.push_back(report.learning_rate);
    range.losses.push_back(smoothed);
    if (smoothed < lowest) {
      lowest = smoothed;
      range.lowest_loss_rate = report.learning_rate;
    }
    if (!std::isfinite(smoothed) || smoothed > r.divergence * lowest) {
      control.stop("the loss diverged");
    } else if (step >= r.steps) {
      control.stop("the last rate");
    } else {
      control.set_learning_rate(rate_at(r, step));
    }
  };
  try {
    Fit run(network, backend, FitData(training), std::move(options));
    const FitResult result = run.run();
    range.ended = result.stopped_because.empty() ? "the data's end" : result.stopped_because;
  } catch (const TrainingDiverged& e) {
    range.ended = std::string("the loss diverged: ") + e.what();
  }
  range.suggestion = steepest_descent(range);
  return range;
}

}  // namespace cnn
