#pragma once
// The run's metrics file (FitOptions::metrics): a JSON line a step, one an epoch and a summary at
// the end, streamed (MetricsFile). A callback over the run's events (FitCallbacks), on the rank
// that writes. A resumed run's file is cut back to what its checkpoint saw, or, where that is
// gone, opens with the lines of the run's history.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include <cnnengine/engine/core/backend.hpp>
#include "fit/detail/run_totals.hpp"
#include <cnnengine/fit/fit.hpp>
#include "fit/metrics_file.hpp"

namespace cnn::detail {

class MetricsLog {
 public:
  struct Settings {
    std::string path;
    // A resumed run: the bytes its checkpoint saw, and its history, written where they are gone.
    std::uint64_t keep_bytes = 0;
    const RunProgress* resumed = nullptr;
    std::size_t batches_per_epoch = 0;
    bool distributed = false;  // over several ranks: each step's communication_seconds
    MonitoredMetric monitor = MonitoredMetric::validation_loss;
    int batch = 0;
    std::size_t data_set_host_bytes = 0;
    // A run stopped by a signal ends the file with its summary line only where the run shows no
    // progress (as it always has).
    bool summary_after_signal = true;
  };
  // The file opened now (an error naming it where it cannot be); `backend` must outlive the log.
  MetricsLog(Settings settings, const Backend& backend);
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  // Its events, bound to this log: it must outlive the run.
  FitCallbacks callbacks();
  // Bytes in the file so far, which a checkpoint records.
  std::uint64_t bytes() const { return file_.bytes(); }

 private:
  void step(const StepReport& r, FitControl& control);
  void epoch_end(const EpochRecord& e);
  void run_end(const FitResult& result, FitControl& control);
  // The CPU time of the epoch's training, taken when its evaluation or its end comes.
  void end_training_time();

  Settings settings_;
  const Backend& backend_;
  MetricsFile file_;
  RunTotals totals_;
  double cpu_at_epoch_begin_ = 0;
  std::optional<double> training_cpu_seconds_;
};

}  // namespace cnn::detail
