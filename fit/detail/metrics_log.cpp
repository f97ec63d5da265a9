#include "fit/detail/metrics_log.hpp"

#include <sys/resource.h>

#include <cnnengine/engine/core/task_scores.hpp>
#include "fit/detail/run_log.hpp"
#include "fit/detail/run_text.hpp"

namespace cnn::detail {
namespace {

using nlohmann::json;

// CPU seconds of the whole process (every thread), user and system: a machine shared with other
// work stretches an epoch's wall time, much less the CPU time it took.
double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

}  // namespace

MetricsLog::MetricsLog(Settings settings, const Backend& backend)
    : settings_(std::move(settings)), backend_(backend), file_(settings_.path, settings_.keep_bytes) {
  if (settings_.resumed && !file_.kept()) write_history(file_, *settings_.resumed, settings_.batches_per_epoch);
}

FitCallbacks MetricsLog::callbacks() {
  FitCallbacks c;
  c.on_run_begin = [this](FitControl& control) { totals_.begin(control.trainer()); };
  c.on_epoch_begin = [this](int, FitControl&) {
    cpu_at_epoch_begin_ = process_cpu_seconds();
    training_cpu_seconds_.reset();
  };
  c.on_step = [this](const StepReport& r, FitControl& control) { step(r, control); };
  c.on_evaluation_begin = [this](std::string_view, std::size_t, FitControl&) { end_training_time(); };
  c.on_epoch_end = [this](const EpochRecord& e, FitControl&) { epoch_end(e); };
  c.on_run_end = [this](const FitResult& result, FitControl& control) { run_end(result, control); };
  return c;
}

void MetricsLog::end_training_time() {
  if (!training_cpu_seconds_) training_cpu_seconds_ = process_cpu_seconds() - cpu_at_epoch_begin_;
}

void MetricsLog::step(const StepReport& r, FitControl& control) {
  totals_.add(r);
  const RunProgress& p = control.progress();
  const double rate = p.seconds > 0 ? static_cast<double>(p.seen) / p.seconds : 0;
  const std::size_t reserved = control.trainer().memory_stack().statistics().current_bytes;
  json line = {{"type", "step"},
               {"epoch", p.epoch},
               {"step", r.step},
               {"loss", r.loss},
               {"accuracy", r.accuracy},
               {"lr", decimal(r.learning_rate)},
               {"micro_batch", r.micro_batch},
               {"micro_batches", r.micro_batches},
               {"images_per_second", rate},
               {"host_waits", r.host_waits},
               {"reserved_bytes", reserved}};
  if (settings_.distributed) line["communication_seconds"] = r.communication_seconds;
  if (r.loss_scale > 0) {
    line["loss_scale"] = r.loss_scale;
    line["skipped"] = r.skipped;
  }
  file_.write(line);
}

void MetricsLog::epoch_end(const EpochRecord& e) {
  end_training_time();
  json line = epoch_line(e);
  line["cpu_seconds"] = *training_cpu_seconds_;  // every thread's, in this process, for this epoch's training
  file_.write(line);
}

void MetricsLog::run_end(const FitResult& result, FitControl& control) {
  if (result.signal && !settings_.summary_after_signal) return;
  Trainer& trainer = control.trainer();
  const auto stats = trainer.memory_stack().statistics();
  json line = {{"type", "summary"},
               {"epochs", finished_epochs(control.progress().epochs)},
               {"epochs_this_run", result.epochs_trained},
               {"stopped_because", result.stopped_because},
               {"best_epoch", result.best_epoch},
               {"tested_epoch", result.tested_epoch},
               {"monitor", to_string(settings_.monitor)},
               {"test_loss", result.test ? json(result.test->loss) : json()},
               {"test_accuracy", result.test ? json(result.test->accuracy) : json()},
               {"images_per_second", images_per_second(control.progress().epochs)},
               {"seconds", result.seconds},
               {"batch", settings_.batch},
               {"micro_batch", trainer.micro_batch()},
               {"peak_reserved_bytes", stats.peak_bytes},
               {"reserved_before_step1", totals_.reserved_at_start()},
               {"upstream_allocations", stats.allocations},
               {"library_reserved_bytes", backend_.library_reserved_bytes()},
               {"loader_staging_bytes", trainer.memory_stack().account().loader_staging()},
               {"graph_replays", trainer.graph_replays()},
               {"peak_resident_bytes", peak_resident_bytes()},
               {"data_set_host_bytes", settings_.data_set_host_bytes},
               {"ranks", trainer.ranks()},
               {"communication_seconds_per_step", totals_.communication_seconds_per_step(trainer)},
               {"host_waits", totals_.host_waits()}};
  if (result.test)
    for (const auto& [name, value] : headline_scores(result.test->scores)) line["test_" + name] = value;
  if (trainer.loss_scale() > 0) {
    line["loss_scale"] = trainer.loss_scale();
    line["skipped_steps"] = trainer.skipped_steps();
  }
  file_.write(line);
}

}  // namespace cnn::detail
