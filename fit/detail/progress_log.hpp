#pragma once
// The run's progress for a person watching (Keras's ProgbarLogger): a bar on stderr while
// training and evaluating, a line an epoch on stdout, and the run's summary at its end. A callback
// over the run's events (FitCallbacks), on the rank that writes.
#include <chrono>
#include <filesystem>
#include <optional>

#include "fit/detail/progress_bar.hpp"
#include "fit/detail/run_totals.hpp"
#include <cnnengine/fit/fit.hpp>

namespace cnn::detail {

class ProgressLog {
 public:
  struct Settings {
    bool bar = true;  // the bar on stderr
    Task task = Task::classify;
    MonitoredMetric monitor = MonitoredMetric::validation_loss;
    std::filesystem::path save;  // the run's checkpoint, named in the summary
    bool distributed = false;    // over several ranks: the summary says how long they waited
  };
  explicit ProgressLog(Settings settings) : settings_(std::move(settings)) {}
  ProgressLog(const ProgressLog&) = delete;
  ProgressLog& operator=(const ProgressLog&) = delete;

  // Its events, bound to this log: it must outlive the run.
  FitCallbacks callbacks();

 private:
  void run_begin(FitControl& control);
  void epoch_begin(int epoch, FitControl& control);
  void step(FitControl& control);
  void evaluation_begin(std::string_view split, std::size_t batches);
  void evaluation_batch(std::size_t done);
  void evaluation(std::string_view split, const EvalResult& result);
  void epoch_end(const EpochRecord& e, FitControl& control);
  void run_end(const FitResult& result, FitControl& control);
  // The bar in progress, ended: training's ends where its evaluation, its epoch or the run does.
  void end_bar();

  Settings settings_;
  RunTotals totals_;
  std::optional<ProgressBar> bar_;
  std::size_t evaluation_batches_ = 0;
  std::chrono::steady_clock::time_point evaluation_start_{};
  std::optional<EvalResult> validated_, tested_;  // this epoch's
};

}  // namespace cnn::detail
