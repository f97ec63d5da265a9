// A run's epochs (Fit::run): training, evaluation, the best epoch, saves and stops; the events its
// callbacks (the run's outputs among them) are told.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <string_view>
#include <utility>

#include <cnnengine/base/error.hpp>
#include <cnnengine/engine/core/task_scores.hpp>
#include "fit/detail/fit_state.hpp"
#include "fit/detail/stop_signal.hpp"

namespace cnn {

using detail::Clock;
using detail::decimal;
using detail::number;
using nlohmann::json;

namespace {

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
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

// The epochs from where the run stands, until the last or a stop; then the test set, once, and
// the result. What the run shows and writes, its callbacks do (FitCallbacks).
FitResult Fit::State::run() {
  std::error_code ec;
  save_was_there = !o.save.empty() && std::filesystem::exists(o.save, ec);
  saved_step = -1;
  std::optional<detail::StopOnSignal> signals;
  if (o.stop_on_signal) signals.emplace();
  run_start = Clock::now();
  stop_reason.clear();
  notify(&FitCallbacks::on_run_begin, control());
  FitResult result;
  const int first_epoch = progress_.epoch;
  while (progress_.epoch <= o.epochs && stop_reason.empty()) {
    unfreeze();
    int signal = train_epoch();
    if (!signal && stop_reason.empty()) signal = finish_epoch();
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
  const detail::BestEpoch best = detail::best_epoch(progress_.epochs, o.monitor);
  result.best_epoch = best.epoch;
  result.best_value = best.value;
  result.tested_epoch = progress_.epochs.empty() ? 0 : progress_.epochs.back().epoch;
  if (!result.signal && o.restore_best && result.best_epoch > 0 && result.best_epoch != result.tested_epoch) {
    // The best epoch's parameters and running statistics; the run's checkpoint stays the last epoch's.
    load_parameters(best_checkpoint_path(o.save), network, trainer_->parameters(), false);
    trainer_->synchronize_replicas();
    result.tested_epoch = result.best_epoch;
  }
  if (!result.signal && test_loader) {
    const EpochRecord* last = progress_.epochs.empty() ? nullptr : &progress_.epochs.back();
    // The epoch's own test, where nothing trained after it (a stop within an epoch did).
    const bool stopped_after_epoch = stop_reason.empty() || (early_stopping && early_stopping->stopped());
    if (result.epochs_trained > 0 && last && last->test_loss && stopped_after_epoch &&
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
  result.history = progress_.epochs;
  if (o.keep_best && result.best_epoch > 0) result.best_checkpoint = best_checkpoint_path(o.save);
  result.seconds = seconds_since(run_start);
  result.steps = trainer_->steps();
  notify(&FitCallbacks::on_run_end, std::as_const(result), control());
  return result;
}

// The epoch's batches from where the run stands; a signal's number when a stop was asked. Steps
// are submitted without waiting for the device (Trainer::submit_step): a step's report may come
// with the next one's submission, and the last one's is drained before anything reads the
// trainer's state.
int Fit::State::train_epoch() {
  // The loader's counts before its threads start on the epoch: a batch they finish before the
  // first next() is the epoch's work too (a short epoch's every batch, at times).
  loader_at_epoch_start = train_loader->statistics();
  train_loader->start_epoch(progress_.epoch, progress_.batches_done);
  seconds_before = progress_.seconds;
  epoch_start = Clock::now();
  data_wait_seconds = 0;
  notify(&FitCallbacks::on_epoch_begin, std::as_const(progress_.epoch), control());
  int signal = 0;
  for (;;) {
    const Clock::time_point asked = Clock::now();
    const std::optional<Batch> batch = train_loader->next();
    data_wait_seconds += seconds_since(asked);
    if (!batch) break;
    if (const std::optional<StepReport> r = trainer_->submit_step(*batch)) {
      record(*r);
      if (o.save_every > 0 && r->step % o.save_every == 0) save();
    }
    if ((signal = agreed_stop()) || !stop_reason.empty()) break;
  }
  drain();
  return signal;
}

// One step's report into the run's progress, then to the callbacks.
void Fit::State::record(const StepReport& r) {
  progress_.loss_sum += r.loss * r.samples;
  progress_.correct += r.accuracy * r.samples;
  progress_.seen += static_cast<std::size_t>(r.samples);
  ++progress_.batches_done;
  progress_.seconds = seconds_before + seconds_since(epoch_start);
  progress_.steps.push_back({static_cast<float>(r.loss), static_cast<float>(r.accuracy), r.learning_rate});
  notify(&FitCallbacks::on_step, r, control());
}

// The step still pending (its loss on the way back), recorded: the trainer's state is then the
// progress's.
void Fit::State::drain() {
  if (const std::optional<StepReport> r = trainer_->drain()) record(*r);
}

// The loader's data in order; none when a stop was asked during it (on one process: over several,
// the ranks agree only at step boundaries).
std::optional<EvalResult> Fit::State::evaluate(data::Loader* loader, const char* split) {
  if (!loader) return std::nullopt;
  const std::string_view name = split;
  notify(&FitCallbacks::on_evaluation_begin, name, loader->batches_per_epoch(), control());
  loader->start_epoch(1);
  std::size_t batches = 0;
  const EvalResult result = trainer_->evaluate([&]() -> std::optional<Batch> {
    if (!communicator && detail::stop_requested()) return std::nullopt;
    std::optional<Batch> batch = loader->next();
    if (batch && batches > 0) notify(&FitCallbacks::on_evaluation_batch, name, std::as_const(batches), control());
    if (batch) ++batches;
    return batch;
  });
  if (!communicator && detail::stop_requested()) return std::nullopt;
  notify(&FitCallbacks::on_evaluation, name, result, control());
  return result;
}

// The epoch's evaluation, record, callbacks and saves; a signal's number when a stop was asked
// during the evaluation, which is left unfinished: the run is saved at the epoch's last step, and
// a resumed run evaluates it.
int Fit::State::finish_epoch() {
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
  // This run()'s part of the epoch (a resumed epoch's earlier part was another process's).
  if (const double looped = progress_.seconds - seconds_before; looped > 0)
    e.data_wait_share = std::min(1.0, data_wait_seconds / looped);
  const data::LoaderStatistics now = train_loader->statistics();
  if (const double busy = now.busy_seconds - loader_at_epoch_start.busy_seconds; busy > 0)
    e.loader_images_per_second = static_cast<double>(now.samples - loader_at_epoch_start.samples) / busy;
  const float last_rate = progress_.steps.empty() ? trainer_->learning_rate() : progress_.steps.back().learning_rate;
  e.learning_rate = decimal(last_rate);
  progress_.epochs.push_back(e);
  progress_.batches_done = 0;
  progress_.loss_sum = progress_.correct = progress_.seconds = 0;
  progress_.seen = 0;
  // The logs, then what changes the rate from the next step on (the plateau schedule, a user's
  // callback), before the saves, which keep it.
  notify(&FitCallbacks::on_epoch_end, std::as_const(e), control());
  // The checkpoint names the next epoch: a run resumed from it starts there.
  ++progress_.epoch;
  save();
  if (o.keep_best && writes && detail::best_epoch(progress_.epochs, o.monitor).epoch == e.epoch)
    save_to(best_checkpoint_path(o.save));
  return 0;
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
  kept["metrics_bytes"] = metrics_log ? metrics_log->bytes() : 0;
  kept["ranks"] = trainer_->ranks();
  kept["total_steps"] = o.total_steps;
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
