// A run's epochs (Fit::run): training, evaluation, the watched metric, saves, stops and logs.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sys/resource.h>

#include "base/error.hpp"
#include "engine/core/task_scores.hpp"
#include "fit/detail/fit_state.hpp"
#include "fit/detail/run_log.hpp"
#include "fit/detail/stop_signal.hpp"

namespace cnn {

using detail::Clock;
using detail::decimal;
using detail::fixed;
using detail::lower_is_better;
using detail::number;
using detail::plural;
using nlohmann::json;

namespace {

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// CPU seconds of the whole process (every thread), user and system: a machine shared with other
// work stretches an epoch's wall time, much less the CPU time it took.
double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

}  // namespace

void Fit::State::set_learning_rate(float rate) {
  if (!std::isfinite(rate) || rate <= 0)
    throw ConfigError("the learning rate must be a finite number above 0, not " + number(rate));
  const float scheduled = trainer_->learning_rate() / trainer_->learning_rate_scale();
  if (!(scheduled > 0))
    throw ConfigError("the schedule's rate is 0 at step " + std::to_string(trainer_->steps() + 1) +
                      ": no scale makes it " + number(rate));
  trainer_->set_learning_rate_scale(rate / scheduled);
}

// ---- the run ------------------------------------------------------------------------------------

FitResult Fit::State::run() {
  std::error_code ec;
  save_was_there = !o.save.empty() && std::filesystem::exists(o.save, ec);
  saved_step = -1;
  std::optional<detail::StopOnSignal> signals;
  if (o.stop_on_signal) signals.emplace();
  run_start = Clock::now();
  reserved_at_start = trainer_->memory_stack().statistics().current_bytes;
  steps_at_start = trainer_->steps();
  communication_seconds = 0;
  host_waits = 0;
  stop_reason.clear();
  FitResult result;
  const int first_epoch = progress_.epoch;
  for (; progress_.epoch <= o.epochs && !stopped_early(result) && stop_reason.empty(); ++progress_.epoch) {
    int signal = train_epoch();
    if (!signal && stop_reason.empty()) signal = finish_epoch(result);
    if (signal) {
      save();
      result.signal = signal;
      result.stopped_because = "signal " + std::to_string(signal);
      break;
    }
    if (!stop_reason.empty() && progress_.batches_done > 0) {  // stopped within the epoch
      save();
      break;
    }
  }
  if (!stop_reason.empty()) result.stopped_because = stop_reason;
  result.epochs_trained = static_cast<int>(std::count_if(progress_.epochs.begin(), progress_.epochs.end(),
                                                         [&](const EpochRecord& e) { return e.epoch >= first_epoch; }));
  best_of(result);
  result.tested_epoch = progress_.epochs.empty() ? 0 : progress_.epochs.back().epoch;
  if (!result.signal && o.restore_best && result.best_epoch > 0 && result.best_epoch != result.tested_epoch) {
    // The best epoch's parameters and running statistics; the run's checkpoint stays the last epoch's.
    load_parameters(best_checkpoint_path(o.save), network, trainer_->parameters(), false);
    trainer_->synchronize_replicas();
    result.tested_epoch = result.best_epoch;
  }
  if (!result.signal && test_loader) {
    const EpochRecord* last = progress_.epochs.empty() ? nullptr : &progress_.epochs.back();
    if (result.epochs_trained > 0 && last && last->test_loss && stop_reason.empty() &&
        result.tested_epoch == last->epoch) {  // tested with its epoch
      result.test = EvalResult{};
      result.test->loss = *last->test_loss;
      result.test->accuracy = last->test_accuracy.value_or(0);
      result.test->samples = test->size();
    } else if (!(result.test = evaluate(test_loader.get(), "test"))) {
      // Stopped by a signal during the evaluation: the run is saved as it was.
      result.signal = detail::stop_requested();
      result.stopped_because = "signal " + std::to_string(result.signal);
    }
  }
  if (events && result.test)
    events->scalars(trainer_->steps(), {{"test/loss", static_cast<float>(result.test->loss)},
                                        {"test/accuracy", static_cast<float>(result.test->accuracy)}});
  result.history = progress_.epochs;
  if (o.keep_best && result.best_epoch > 0) result.best_checkpoint = best_checkpoint_path(o.save);
  result.seconds = seconds_since(run_start);
  result.steps = trainer_->steps();
  summary(result);
  return result;
}

// The epoch's batches from where the run stands; a signal's number when a stop was asked. Steps
// are submitted without waiting for the device (Trainer::submit_step): a step's report may come
// with the next one's submission, and the last one's is drained before anything reads the
// trainer's state.
int Fit::State::train_epoch() {
  const int epoch = progress_.epoch;
  train_loader->start_epoch(epoch, progress_.batches_done);
  detail::ProgressBar epoch_bar("epoch " + std::to_string(epoch) + "/" + std::to_string(o.epochs),
                                train_loader->batches_per_epoch(), !show_bar());
  bar = &epoch_bar;
  seconds_before = progress_.seconds;
  epoch_start = Clock::now();
  const double cpu_start = process_cpu_seconds();
  int signal = 0;
  while (auto batch = train_loader->next()) {
    if (const std::optional<StepReport> r = trainer_->submit_step(*batch)) {
      record(*r);
      if (o.save_every > 0 && r->step % o.save_every == 0) save();
    }
    if ((signal = agreed_stop()) || !stop_reason.empty()) break;
  }
  drain();
  epoch_bar.finish();
  bar = nullptr;
  epoch_cpu_seconds = process_cpu_seconds() - cpu_start;
  return signal;
}

// One step's report into the run's progress, the progress bar and the metrics file.
void Fit::State::record(const StepReport& r) {
  progress_.loss_sum += r.loss * r.samples;
  progress_.correct += r.accuracy * r.samples;
  progress_.seen += static_cast<std::size_t>(r.samples);
  ++progress_.batches_done;
  progress_.seconds = seconds_before + seconds_since(epoch_start);
  progress_.steps.push_back({static_cast<float>(r.loss), static_cast<float>(r.accuracy), r.learning_rate});
  const double seen = static_cast<double>(progress_.seen);
  const double rate = progress_.seconds > 0 ? seen / progress_.seconds : 0;
  if (bar) {
    // What is left of the run: this epoch's batches and the later epochs', at this epoch's pace.
    const double per_batch = progress_.seconds / static_cast<double>(progress_.batches_done);
    const std::size_t per_epoch = train_loader->batches_per_epoch();
    const double left = static_cast<double>(per_epoch - std::min(per_epoch, progress_.batches_done)) +
                        static_cast<double>(per_epoch) * static_cast<double>(o.epochs - progress_.epoch);
    char loss[32], speed[48];
    std::snprintf(loss, sizeof loss, "loss %.4f", progress_.loss_sum / seen);
    std::snprintf(speed, sizeof speed, "%.0f img/s  acc %.3f", rate, progress_.correct / seen);
    bar->update(progress_.batches_done, per_batch * left, {loss, speed, "mem " + memory_note()});
  }
  communication_seconds += r.communication_seconds;
  host_waits += r.host_waits;
  // Every step: the lines are built only where they are written.
  const std::size_t reserved = trainer_->memory_stack().statistics().current_bytes;
  if (metrics->active()) {
    json line = {{"type", "step"}, {"epoch", progress_.epoch}, {"step", r.step}, {"loss", r.loss},
                 {"accuracy", r.accuracy}, {"lr", decimal(r.learning_rate)}, {"micro_batch", r.micro_batch},
                 {"micro_batches", r.micro_batches}, {"images_per_second", rate}, {"host_waits", r.host_waits},
                 {"reserved_bytes", reserved}};
    if (communicator) line["communication_seconds"] = r.communication_seconds;
    if (r.loss_scale > 0) {
      line["loss_scale"] = r.loss_scale;
      line["skipped"] = r.skipped;
    }
    metrics->write(line);
  }
  if (events) {
    events->scalars(r.step, {{"train/loss", static_cast<float>(r.loss)},
                             {"train/accuracy", static_cast<float>(r.accuracy)},
                             {"learning_rate", r.learning_rate},
                             {"images_per_second", static_cast<float>(rate)},
                             {"memory/reserved_bytes", static_cast<float>(reserved)}});
    if (r.loss_scale > 0) events->scalars(r.step, {{"train/loss_scale", r.loss_scale}});
  }
  if (o.callbacks.on_step) o.callbacks.on_step(r, *this);
}

// The step still pending (its loss on the way back), recorded: the trainer's state is then the
// progress's.
void Fit::State::drain() {
  if (const std::optional<StepReport> r = trainer_->drain()) record(*r);
}

// The loader's data in order, with a bar; none when a stop was asked during it (on one process:
// over several, the ranks agree only at step boundaries).
std::optional<EvalResult> Fit::State::evaluate(data::Loader* loader, const char* split) {
  if (!loader) return std::nullopt;
  loader->start_epoch(1);
  detail::ProgressBar eval_bar(split, loader->batches_per_epoch(), !show_bar(), true);
  std::size_t batches = 0;
  const Clock::time_point start = Clock::now();
  const EvalResult result = trainer_->evaluate([&]() -> std::optional<Batch> {
    if (!communicator && detail::stop_requested()) return std::nullopt;
    std::optional<Batch> batch = loader->next();
    if (batch && batches > 0) {
      const double per_batch = seconds_since(start) / static_cast<double>(batches);
      eval_bar.update(batches, per_batch * static_cast<double>(loader->batches_per_epoch() - batches), {});
    }
    if (batch) ++batches;
    return batch;
  });
  const bool stopped = !communicator && detail::stop_requested();
  if (!stopped) eval_bar.update(loader->batches_per_epoch(), 0, {});
  eval_bar.finish();
  if (stopped) return std::nullopt;
  if (o.callbacks.on_evaluation) o.callbacks.on_evaluation(split, result, *this);
  return result;
}

// The epoch's evaluation, record and saves; a signal's number when a stop was asked during the
// evaluation, which is left unfinished: the run is saved at the epoch's last step, and a resumed
// run evaluates it.
int Fit::State::finish_epoch(FitResult& result) {
  std::optional<EvalResult> validated, tested;
  if (validation_loader && !(validated = evaluate(validation_loader.get(), "validation")))
    return detail::stop_requested();
  if (o.test_each_epoch && test_loader && !(tested = evaluate(test_loader.get(), "test")))
    return detail::stop_requested();
  const double seen = static_cast<double>(std::max<std::size_t>(progress_.seen, 1));
  EpochRecord e;
  e.epoch = progress_.epoch;
  e.train_loss = progress_.loss_sum / seen;
  e.train_accuracy = progress_.correct / seen;
  if (validated) {
    e.validation_loss = validated->loss;
    e.validation_accuracy = validated->accuracy;
    for (const auto& [name, value] : headline_scores(validated->scores)) e.validation_scores[name] = value;
  }
  if (tested) {
    e.test_loss = tested->loss;
    e.test_accuracy = tested->accuracy;
    for (const auto& [name, value] : headline_scores(tested->scores)) e.test_scores[name] = value;
  }
  e.seconds = progress_.seconds;
  e.images_per_second = progress_.seconds > 0 ? seen / progress_.seconds : 0;
  const float last_rate = progress_.steps.empty() ? trainer_->learning_rate() : progress_.steps.back().learning_rate;
  e.learning_rate = decimal(last_rate);
  // A regression has no accuracy: its scores (MAE, RMSE) say how close it is.
  const bool accurate = network.task() != Task::regress;
  auto accuracy = [&](double value) { return accurate ? " acc " + fixed(value) : std::string(); };
  if (o.progress && writes) {
    std::string line = "epoch " + std::to_string(e.epoch) + "/" + std::to_string(o.epochs) + ": train loss " +
                       fixed(e.train_loss) + accuracy(e.train_accuracy);
    auto scores = [](const EvalResult& r) {
      const std::string words = describe_scores(r.scores);
      return words.empty() ? std::string() : ", " + words;
    };
    if (validated)
      line += " | val loss " + fixed(validated->loss) + accuracy(validated->accuracy) + scores(*validated);
    if (tested) line += " | test loss " + fixed(tested->loss) + accuracy(tested->accuracy) + scores(*tested);
    char tail[64];
    std::snprintf(tail, sizeof tail, " | %.1fs, %.0f img/s", e.seconds, e.images_per_second);
    if (const float scale = trainer_->loss_scale(); scale > 0) {  // fp16
      char scaled[32];
      std::snprintf(scaled, sizeof scaled, "%g", static_cast<double>(scale));
      line +=
          std::string(" | loss scale ") + scaled + ", " + plural(trainer_->skipped_steps(), "step") + " skipped so far";
    }
    std::cout << line << tail << "\n" << std::flush;
  }
  json line = detail::epoch_line(e);
  line["cpu_seconds"] = epoch_cpu_seconds;  // every thread's, in this process, for this epoch's training
  metrics->write(line);
  if (events) {
    std::vector<std::pair<std::string, float>> scalars = {
        {"epoch", static_cast<float>(e.epoch)},
        {"epoch/train_loss", static_cast<float>(e.train_loss)},
        {"epoch/train_accuracy", static_cast<float>(e.train_accuracy)},
        {"epoch/learning_rate", static_cast<float>(e.learning_rate)},
        {"epoch/images_per_second", static_cast<float>(e.images_per_second)}};
    if (validated) {
      scalars.emplace_back("epoch/val_loss", static_cast<float>(validated->loss));
      scalars.emplace_back("epoch/val_accuracy", static_cast<float>(validated->accuracy));
      for (const auto& [name, value] : e.validation_scores)
        scalars.emplace_back("epoch/val_" + name, static_cast<float>(value));
    }
    if (tested) {
      scalars.emplace_back("epoch/test_loss", static_cast<float>(tested->loss));
      scalars.emplace_back("epoch/test_accuracy", static_cast<float>(tested->accuracy));
      for (const auto& [name, value] : e.test_scores) scalars.emplace_back("epoch/test_" + name, static_cast<float>(value));
    }
    events->scalars(trainer_->steps(), scalars);
  }
  progress_.epochs.push_back(e);
  if (!o.csv.empty() && writes) detail::write_csv(o.csv, progress_.epochs);
  progress_.batches_done = 0;
  progress_.loss_sum = progress_.correct = progress_.seconds = 0;
  progress_.seen = 0;
  // What changes the rate from the next step on does so before the saves, which keep it.
  reduce_on_plateau();
  if (o.callbacks.on_epoch_end) o.callbacks.on_epoch_end(e, *this);
  // The checkpoint names the next epoch: a run resumed from it starts there.
  ++progress_.epoch;
  save();
  best_of(result);
  if (o.keep_best && result.best_epoch == e.epoch && writes) save_to(best_checkpoint_path(o.save));
  --progress_.epoch;
  return 0;
}

// ReduceLROnPlateau's rule, replayed over the run's epochs (so a resumed run needs no more state
// than the scale its trainer keeps): an epoch improves on the best when it is better by more than
// 1e-4 of it; after more than `patience` epochs without one, the rate is multiplied by `factor`
// and the count starts again. Applied when the last epoch is where the rule reduces.
void Fit::State::reduce_on_plateau() {
  const ScheduleConfig& schedule = o.trainer.schedule;
  if (schedule.kind != ScheduleKind::plateau || progress_.epochs.empty()) return;
  const bool lower = lower_is_better(o.monitor);
  std::optional<double> best;
  int without = 0;
  bool reduce = false;
  for (const EpochRecord& e : progress_.epochs) {
    const std::optional<double> value = monitored_value(o.monitor, e);
    if (!value) continue;
    reduce = false;
    const double margin = 1e-4 * std::abs(best.value_or(0));
    if (!best || (lower ? *value < *best - margin : *value > *best + margin)) {
      best = value;
      without = 0;
    } else if (++without > schedule.plateau_patience) {
      without = 0;
      reduce = true;
    }
  }
  if (!reduce || !monitored_value(o.monitor, progress_.epochs.back())) return;
  trainer_->set_learning_rate_scale(trainer_->learning_rate_scale() * schedule.plateau_factor);
  if (o.progress && writes)
    std::cout << "plateau: no better " << to_string(o.monitor) << " for "
              << plural(schedule.plateau_patience + 1, "epoch") << "; the learning rate is now "
              << decimal(trainer_->learning_rate()) << "\n";
}

// The epoch of the best monitored value so far (the first of equals).
void Fit::State::best_of(FitResult& result) const {
  result.best_epoch = 0;
  result.best_value.reset();
  const bool lower = lower_is_better(o.monitor);
  for (const EpochRecord& e : progress_.epochs) {
    const std::optional<double> value = monitored_value(o.monitor, e);
    if (value && (!result.best_value || (lower ? *value < *result.best_value : *value > *result.best_value))) {
      result.best_value = value;
      result.best_epoch = e.epoch;
    }
  }
}

// early_stop N: N epochs have passed without a better monitored value.
bool Fit::State::stopped_early(FitResult& result) const {
  if (o.early_stop <= 0 || progress_.epochs.empty()) return false;
  best_of(result);
  if (result.best_epoch == 0) return false;
  const int last = progress_.epochs.back().epoch;
  if (last - result.best_epoch < o.early_stop) return false;
  result.stopped_because = "early stop: no better " + to_string(o.monitor) + " for " +
                           plural(last - result.best_epoch, "epoch") + " (the best, " + fixed(*result.best_value) +
                           ", at epoch " + std::to_string(result.best_epoch) + ")";
  if (o.progress && writes) std::cout << result.stopped_because << "\n";
  return true;
}

void Fit::State::save() {
  drain();
  if (o.save.empty() || !writes) return;
  save_to(o.save);
  saved_step = trainer_->steps();
}

std::string Fit::State::saved_file_state() const {
  if (o.save.empty() || !writes) return "";
  if (saved_step >= 0)
    return "; " + o.save.string() + " holds the run as it was at step " + std::to_string(saved_step) +
           ", its last save";
  return "; " + o.save.string() + (save_was_there ? " is unchanged" : " was not written");
}

void Fit::State::save_to(const std::filesystem::path& path) {
  TrainingCheckpoint training;
  training.trainer = trainer_->state();
  training.progress = progress_;
  json kept = settings;
  kept["metrics_bytes"] = metrics->bytes();
  kept["ranks"] = trainer_->ranks();
  kept["total_steps"] = o.trainer.total_steps;
  training.settings = kept.dump();
  save_checkpoint(path, network, trainer_->parameters(), model, &training);
}

// A stop asked on any rank stops every rank at the same step (each rank gets the signal from
// mpirun, but not necessarily between the same two steps).
int Fit::State::agreed_stop() {
  if (!communicator) return detail::stop_requested();
  double signal[1] = {static_cast<double>(detail::stop_requested())};
  communicator->max_host(signal);
  return static_cast<int>(signal[0]);
}

}  // namespace cnn
