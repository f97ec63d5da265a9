// What a run prints: its start (the data, the optimizer, the plan) and its summary.
#include <cstdio>
#include <iostream>
#include <sys/resource.h>

#include "base/batch.hpp"
#include "engine/core/task_scores.hpp"
#include "fit/detail/fit_state.hpp"

namespace cnn {

using detail::decimal;
using detail::fixed;
using detail::lower_is_better;
using detail::plural;
using nlohmann::json;

namespace {

// The most resident memory the process has held (ru_maxrss: Linux's VmHWM), in bytes; 0 where it
// cannot say.
std::size_t peak_resident_bytes() {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  return static_cast<std::size_t>(u.ru_maxrss) * 1024;
}

}  // namespace

void Fit::State::print_start() const {
  if (!o.progress || !writes) return;
  std::cout << "data: " << train->description() << "\n";
  std::cout << "      validation: " << (validation ? validation->description() : "none") << "\n";
  std::cout << "      test: "
            << (test ? test->description() + (o.test_each_epoch ? " (every epoch)" : " (evaluated at the end)")
                     : std::string("none"))
            << "\n";
  if (resumed) {
    std::cout << "resumed: epoch " << progress_.epoch << ", batch " << progress_.batches_done << ", step "
              << trainer_->steps() << "\n";
    // A run given more epochs stretches a schedule that follows its length: say what the rate does.
    const long before = resumed_settings.value("total_steps", 0L);
    if (before > 0 && before != o.trainer.total_steps && !progress_.steps.empty())
      std::cout << "note: the " << to_string(o.trainer.schedule.kind) << " schedule now runs over "
                << o.trainer.total_steps << " steps (" << plural(o.epochs, "epoch") << "), not the run's " << before
                << ": the rate goes from " << decimal(progress_.steps.back().learning_rate) << " at step "
                << trainer_->steps() << " to " << decimal(trainer_->learning_rate()) << " at step "
                << trainer_->steps() + 1 << "\n";
  }
  const int ranks = communicator ? communicator->ranks() : 1;
  const int share = share_of_batch(o.trainer.batch, 0, ranks).size;  // rank 0's, the largest
  const int micro = trainer_->micro_batch(), count = (share + micro - 1) / micro, last = share - (count - 1) * micro;
  std::cout << "optimizer: " << trainer_->optimizer().describe() << ", lr " << decimal(o.trainer.optimizer.learning_rate)
            << ", " << to_string(o.trainer.schedule.kind) << " schedule; batch " << o.trainer.batch << " = "
            << (ranks > 1 ? std::to_string(ranks) + " ranks x " : std::string()) << count << " micro-batch"
            << (count > 1 ? "es" : "") << " of " << micro
            << (last != micro ? " (the last one " + std::to_string(last) + ")" : std::string()) << "\n";
  std::string augment;
  if (train_options.augment_flip) augment += "horizontal flips";
  if (train_options.augment_crop_padding > 0)
    augment += (augment.empty() ? "" : ", ") + std::string("random crops (padding ") +
               std::to_string(train_options.augment_crop_padding) + ")";
  std::cout << "augmentation: " << (augment.empty() ? "none" : augment) << "\n";
  const bool plateau = o.trainer.schedule.kind == ScheduleKind::plateau;
  if (o.keep_best || o.early_stop > 0 || plateau)
    std::cout << "watching " << to_string(o.monitor) << " ("
              << (lower_is_better(o.monitor) ? "lower" : "higher") << " is better)"
              << (plateau ? "; the rate x " + detail::number(o.trainer.schedule.plateau_factor) + " after " +
                                plural(o.trainer.schedule.plateau_patience + 1, "epoch") + " without a better one"
                          : std::string())
              << (o.keep_best ? "; the best epoch kept in " + best_checkpoint_path(o.save).string() : std::string())
              << (o.early_stop > 0 ? "; stopping after " + plural(o.early_stop, "epoch") + " without a better one"
                                   : std::string())
              << "\n";
  std::cout << format_memory_table(trainer_->memory()) << std::flush;
}

std::string Fit::State::memory_note() const {
  return memory::format_bytes(trainer_->memory_stack().statistics().current_bytes +
                              stack->account().loader_staging());
}

void Fit::State::summary(const FitResult& result) {
  const auto stats = trainer_->memory_stack().statistics();
  double seconds = 0, images = 0;
  for (const EpochRecord& e : progress_.epochs) {
    seconds += e.seconds;
    images += e.images_per_second * e.seconds;
  }
  const double rate = seconds > 0 ? images / seconds : 0;
  const int finished = progress_.epochs.empty() ? 0 : progress_.epochs.back().epoch;
  const double steps_run = static_cast<double>(trainer_->steps() - steps_at_start);
  const double communication_per_step = steps_run > 0 ? communication_seconds / steps_run : 0;
  const std::size_t resident = peak_resident_bytes();
  if (o.progress && writes) {
    if (result.signal) {
      std::cout << "\nstopped by signal " << result.signal << " at step " << trainer_->steps() << " (epoch "
                << progress_.epoch << ", batch " << progress_.batches_done << ")";
      if (!o.save.empty()) std::cout << ": the run is saved in " << o.save.string();
      std::cout << "\n";
      return;
    }
    if (result.epochs_trained == 0 && !result.stopped_because.size())
      std::cout << "the run had already trained its " << plural(finished, "epoch") << "; nothing to train\n";
    const std::string test_scores = result.test ? describe_scores(result.test->scores) : std::string();
    const bool accurate = network.task() != Task::regress;  // a regression's scores are its MAE and RMSE
    if (result.test)
      std::cout << "test: loss " << fixed(result.test->loss)
                << (accurate ? " accuracy " + fixed(result.test->accuracy) : std::string())
                << (test_scores.empty() ? "" : ", " + test_scores) << " ("
                << plural(static_cast<long>(result.test->samples), "sample") << ", the model after epoch "
                << result.tested_epoch << (result.tested_epoch != finished ? ", the best, restored" : "") << ")\n";
    std::printf("done: %s after %s (%s this run) in %.1fs (%.0f img/s training)\n",
                !result.test ? "no test set"
                : accurate   ? ("test accuracy " + fixed(result.test->accuracy)).c_str()
                             : ("test " + test_scores).c_str(),
                plural(finished, "epoch").c_str(), std::to_string(result.epochs_trained).c_str(), result.seconds,
                rate);
    if (result.best_epoch > 0)
      std::cout << "best " << to_string(o.monitor) << ": " << fixed(*result.best_value) << " at epoch "
                << result.best_epoch
                << (result.best_checkpoint.empty() ? std::string()
                                                   : ", kept in " + result.best_checkpoint.string())
                << "\n";
    if (communicator)
      std::printf("ranks: %d, each waited %.2f ms a step for the others (gradient sums after its backward)\n",
                  trainer_->ranks(), 1e3 * communication_per_step);
    if (trainer_->capturing_graphs() || trainer_->graph_replays() > 0)
      std::printf("cuda graphs: %ld micro-batches replayed\n", trainer_->graph_replays());
    std::printf("memory: reserved %s before step 1, peak %s, %s now; %zu upstream calls in total; the process's "
                "peak resident memory %s\n",
                memory::format_bytes(reserved_at_start).c_str(), memory::format_bytes(stats.peak_bytes).c_str(),
                memory::format_bytes(stats.current_bytes).c_str(), stats.allocations,
                memory::format_bytes(resident).c_str());
    if (!o.save.empty())
      std::cout << "the run is saved in " << o.save.string() << " (weights, optimizer state and position)\n";
    std::cout << std::flush;
  }
  std::size_t data_bytes = train->host_bytes();
  if (validation) data_bytes += validation->host_bytes();
  if (test) data_bytes += test->host_bytes();
  json summary_line = {{"type", "summary"},
                  {"epochs", finished},
                  {"epochs_this_run", result.epochs_trained},
                  {"stopped_because", result.stopped_because},
                  {"best_epoch", result.best_epoch},
                  {"tested_epoch", result.tested_epoch},
                  {"monitor", to_string(o.monitor)},
                  {"test_loss", result.test ? json(result.test->loss) : json()},
                  {"test_accuracy", result.test ? json(result.test->accuracy) : json()},
                  {"images_per_second", rate},
                  {"seconds", result.seconds},
                  {"batch", o.trainer.batch},
                  {"micro_batch", trainer_->micro_batch()},
                  {"peak_reserved_bytes", stats.peak_bytes},
                  {"reserved_before_step1", reserved_at_start},
                  {"upstream_allocations", stats.allocations},
                  {"library_reserved_bytes", backend.library_reserved_bytes()},
                  {"loader_staging_bytes", stack->account().loader_staging()},
                  {"graph_replays", trainer_->graph_replays()},
                  {"peak_resident_bytes", resident},
                  {"data_set_host_bytes", data_bytes},
                  {"ranks", trainer_->ranks()},
                  {"communication_seconds_per_step", communication_per_step},
                  {"host_waits", host_waits}};
  if (result.test)
    for (const auto& [name, value] : headline_scores(result.test->scores)) summary_line["test_" + name] = value;
  if (trainer_->loss_scale() > 0) {
    summary_line["loss_scale"] = trainer_->loss_scale();
    summary_line["skipped_steps"] = trainer_->skipped_steps();
  }
  metrics->write(summary_line);
}

}  // namespace cnn
