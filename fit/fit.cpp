#include "fit/fit.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sys/resource.h>

#include "base/batch.hpp"
#include "base/error.hpp"
#include "fit/detail/event_file.hpp"
#include "fit/detail/progress_bar.hpp"
#include "fit/detail/run_log.hpp"
#include "fit/detail/stop_signal.hpp"
#include "fit/metrics_file.hpp"
#include "memory/memory_stack.hpp"
#include "models/network_text.hpp"

namespace cnn {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// The most resident memory the process has held (VmHWM), in bytes; 0 where it cannot say.
std::size_t peak_resident_bytes() {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  return static_cast<std::size_t>(u.ru_maxrss) * 1024;
}

// CPU seconds of the whole process (every thread), user and system: a machine shared with other
// work stretches an epoch's wall time, much less the CPU time it took.
double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// The value a float stands for in decimal (0.01f is 0.01, not 0.009999999776482582): what a
// metrics file shows of a rate.
double decimal(float value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.7g", static_cast<double>(value));
  return std::strtod(text, nullptr);
}

// "0.1", "1e-05": a number as one would write it.
std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

std::string fixed(double value, int digits = 4) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

std::string plural(long count, const std::string& word) {
  return std::to_string(count) + " " + word + (count == 1 ? "" : "s");
}

bool lower_is_better(MonitoredMetric metric) {
  return metric == MonitoredMetric::validation_loss || metric == MonitoredMetric::train_loss;
}

void check_options(const FitOptions& o, const FitData& data) {
  if (!data.train) throw ConfigError("fit: no training data (null)");
  if (o.epochs < 1) throw ConfigError("fit: the run needs at least 1 epoch, not " + std::to_string(o.epochs));
  if (!(o.validation_split >= 0 && o.validation_split < 1))
    throw ConfigError("the validation split must be a fraction from 0 to below 1, not " + number(o.validation_split));
  if (o.validation_split > 0 && data.validation)
    throw ConfigError("a validation split of " + number(o.validation_split) +
                      " was asked for, but the data has its own validation set (" + data.validation->description() +
                      "): one or the other");
  if (o.save_every < 0 || o.early_stop < 0)
    throw ConfigError("fit: save_every and early_stop count steps and epochs: 0 or more");
  if (o.keep_best && o.save.empty())
    throw ConfigError("keeping the best checkpoint needs a checkpoint path to keep it beside (save)");
  if (!o.resume.empty() && !o.load.empty())
    throw ConfigError("a run is resumed (" + o.resume.string() + ") or starts from weights (" + o.load.string() +
                      "), not both");
  const bool validated = o.validation_split > 0 || (data.validation && data.validation->size() > 0);
  const bool watches_validation = o.monitor == MonitoredMetric::validation_loss ||
                                  o.monitor == MonitoredMetric::validation_accuracy;
  const bool plateau = o.trainer.schedule.kind == ScheduleKind::plateau;
  if ((o.keep_best || o.early_stop > 0 || plateau) && watches_validation && !validated)
    throw ConfigError(std::string(o.keep_best ? "keeping the best model" : o.early_stop > 0 ? "stopping early"
                                                                                           : "the plateau schedule") +
                      " watches " +
                      to_string(o.monitor) +
                      ", and this run has no validation set: hold out a validation split, give a val/ folder, or "
                      "watch train_loss");
}

}  // namespace

std::filesystem::path best_checkpoint_path(const std::filesystem::path& save) {
  std::filesystem::path best = save.parent_path() / save.stem();
  best += ".best" + save.extension().string();
  return best;
}

// ---- Fit's state: the data it reads, the trainer, the loaders, the run's progress ---------------

struct Fit::State final : FitControl {
  State(Network& n, Backend& b, FitOptions options) : network(n), backend(b), o(std::move(options)) {}

  Network& network;
  Backend& backend;
  FitOptions o;
  ModelDescription model;
  json settings;  // the application's and the run's own
  std::optional<CheckpointInfo> resumed;
  json resumed_settings;  // what the resumed run kept

  // The data as read: the validation split and the limits applied.
  std::unique_ptr<data::Dataset> split_train, split_validation, limited_train, limited_validation, limited_test;
  const data::Dataset* train = nullptr;
  const data::Dataset* validation = nullptr;
  const data::Dataset* test = nullptr;

  data::LoaderOptions train_options, eval_options;
  std::unique_ptr<memory::MemoryStack> stack;
  std::unique_ptr<Trainer> trainer_;
  std::unique_ptr<data::Loader> train_loader, validation_loader, test_loader;
  std::unique_ptr<MetricsFile> metrics;
  std::unique_ptr<detail::EventFile> events;  // TensorBoard's
  Communicator* communicator = nullptr;
  bool writes = true;  // rank 0 (the only one, alone) prints, writes metrics and checkpoints
  RunProgress progress_;

  // This run()'s figures.
  std::size_t reserved_at_start = 0;
  long steps_at_start = 0;
  double communication_seconds = 0;
  long host_waits = 0;
  double epoch_cpu_seconds = 0;
  std::string stop_reason;  // a callback's stop
  detail::ProgressBar* bar = nullptr;
  double seconds_before = 0;
  Clock::time_point epoch_start{}, run_start{};

  // FitControl
  void stop(const std::string& why) override { stop_reason = why.empty() ? "stopped by a callback" : why; }
  void set_learning_rate(float rate) override {
    if (!std::isfinite(rate) || rate <= 0)
      throw ConfigError("the learning rate must be a finite number above 0, not " + number(rate));
    const float scheduled = trainer_->learning_rate() / trainer_->learning_rate_scale();
    if (!(scheduled > 0))
      throw ConfigError("the schedule's rate is 0 at step " + std::to_string(trainer_->steps() + 1) +
                        ": no scale makes it " + number(rate));
    trainer_->set_learning_rate_scale(rate / scheduled);
  }
  Trainer& trainer() override { return *trainer_; }
  const RunProgress& progress() const override { return progress_; }
  int epochs() const override { return o.epochs; }
  std::size_t batches_per_epoch() const override { return train_loader->batches_per_epoch(); }

  void open_data(const FitData& data);
  void describe_model_of_run();
  void plan();
  void load_state();
  void load_starting_weights();
  void print_start() const;

  FitResult run();
  int train_epoch();
  void record(const StepReport& r);
  void drain();
  std::optional<EvalResult> evaluate(data::Loader* loader, const char* split);
  int finish_epoch(FitResult& result);
  bool stopped_early(FitResult& result) const;
  void best_of(FitResult& result) const;
  void reduce_on_plateau();
  void save();
  void save_to(const std::filesystem::path& path);
  int agreed_stop();
  void summary(const FitResult& result);
  std::string memory_note() const;
  bool show_bar() const { return o.progress && o.progress_bar && writes; }
};

void Fit::State::open_data(const FitData& data) {
  double fraction = o.validation_split;
  std::uint64_t seed = o.trainer.seed;
  // A resumed run holds out what it held out.
  if (resumed && resumed_settings.contains("validation")) {
    const json& v = resumed_settings["validation"];
    const double saved_fraction = v.value("fraction", 0.0);
    const auto saved_seed = v.value("seed", std::uint64_t{1});
    if (o.progress && writes && (saved_fraction != fraction || saved_seed != seed))
      std::cout << "validation: the resumed run's split (" << saved_fraction << " of the training data, seed "
                << saved_seed << ")\n";
    fraction = saved_fraction;
    seed = saved_seed;
  } else if (resumed && fraction > 0) {
    throw ConfigError(o.resume.string() + ": the run held out no validation split; a split now would move samples "
                      "it trained on into validation");
  }
  train = data.train;
  validation = data.validation && data.validation->size() > 0 ? data.validation : nullptr;
  test = data.test && data.test->size() > 0 ? data.test : nullptr;
  if (o.limit > 0 && o.limit < train->size()) {
    limited_train = data::first_samples(*train, o.limit);
    train = limited_train.get();
  }
  if (fraction > 0) {
    if (validation)
      throw ConfigError("the resumed run held out a validation split, and the data now has its own validation set (" +
                        validation->description() + ")");
    data::ValidationSplit split = data::split_for_validation(*train, fraction, seed);
    split_train = std::move(split.train);
    split_validation = std::move(split.validation);
    train = split_train.get();
    validation = split_validation.get();
    settings["validation"] = {{"fraction", fraction}, {"seed", seed}, {"samples", validation->size()}};
    if (resumed && resumed_settings.contains("validation") && settings["validation"] != resumed_settings["validation"])
      throw CheckpointError(o.resume.string() + ": the validation split now holds " +
                            std::to_string(validation->size()) + " samples, the run's held " +
                            resumed_settings["validation"].value("samples", json()).dump() +
                            ": the training data changed");
  }
  if (o.limit_eval > 0 && validation && o.limit_eval < validation->size()) {
    limited_validation = data::first_samples(*validation, o.limit_eval);
    validation = limited_validation.get();
  }
  if (o.limit_eval > 0 && test && o.limit_eval < test->size()) {
    limited_test = data::first_samples(*test, o.limit_eval);
    test = limited_test.get();
  }
  if (train->size() == 0) throw ConfigError("fit: the training data holds no sample (" + train->description() + ")");
}


void Fit::State::describe_model_of_run() {
  if (resumed) {
    model = resumed->model;
  } else if (o.model) {
    model = *o.model;
  } else {
    model = describe_model(network);
    model.class_names = train->class_names();
    model.preprocessing.normalization = o.loading.normalization;
  }
  data::check_normalization(model.preprocessing.normalization, train->shape().channels);
  // A class's label is its place in the list: the same names in another order would relabel them.
  if (resumed && !model.class_names.empty() && model.class_names != train->class_names()) {
    std::string run, now;
    for (const std::string& name : model.class_names) run += (run.empty() ? "" : ", ") + name;
    for (const std::string& name : train->class_names()) now += (now.empty() ? "" : ", ") + name;
    throw ConfigError(o.resume.string() + ": the run's classes are " + run + "; the data now has " + now);
  }
}

namespace {

// Why each epoch's last batch must be left out (the order is shuffled: a different one each
// epoch), or "" when it trains; a ConfigError when no batch can train.
// - BatchNorm over one value per channel needs two samples, on every rank (a rank's share of
//   none sits the step out, but a share of one cannot train).
// - Synchronised BatchNorm needs every batch shared evenly over the ranks.
std::string last_batch_left_out(const TrainerOptions& t, const TrainingBatchNeed& need, std::size_t samples,
                                int ranks) {
  const auto batch = static_cast<std::size_t>(t.batch), rank_count = static_cast<std::size_t>(ranks);
  const std::size_t least = static_cast<std::size_t>(need.samples) * rank_count;
  if (need.samples > 1 && samples < least)
    throw ConfigError("the training set holds " + std::to_string(samples) + " sample(s), too few: " + need.why);
  const bool synchronised = t.sync_batchnorm && ranks > 1;
  if (synchronised && samples < batch && samples % rank_count != 0)
    throw ConfigError("synchronised BatchNorm: the training set's " + std::to_string(samples) +
                      " samples make one batch, which cannot be shared evenly over the " + std::to_string(ranks) +
                      " ranks (train on a multiple of them, or another batch)");
  const std::size_t rest = samples % batch;
  if (samples <= batch || rest == 0) return "";
  if (need.samples > 1 && rest < least) return ", because " + need.why;
  if (synchronised && rest % rank_count != 0)
    return ": synchronised BatchNorm needs every batch shared evenly over the " + std::to_string(ranks) + " ranks";
  return "";
}

}  // namespace

void Fit::State::plan() {
  communicator = o.trainer.communicator;
  const int rank = communicator ? communicator->rank() : 0, ranks = communicator ? communicator->ranks() : 1;
  writes = rank == 0;
  train_options = o.loading;
  train_options.batch = o.trainer.batch;
  train_options.seed = o.trainer.seed;
  train_options.rank = rank;
  train_options.ranks = ranks;
  train_options.normalization = model.preprocessing.normalization;
  eval_options = train_options;
  eval_options.shuffle = false;
  eval_options.drop_last = false;
  eval_options.augment_flip = false;
  eval_options.augment_crop_padding = 0;
  const std::size_t samples = train->size(), rest = samples % static_cast<std::size_t>(std::max(1, o.trainer.batch));
  if (const std::string why = last_batch_left_out(o.trainer, network.training_batch_need(), samples, ranks);
      !why.empty()) {
    train_options.drop_last = true;
    if (o.progress && writes)
      std::cout << "note: each epoch's last batch (" << plural(static_cast<long>(rest), "sample")
                << ") is left out, a different one each epoch" << why << "\n";
  }
  const std::size_t batches = data::Loader::batches_per_epoch_for(*train, train_options);
  if (o.trainer.total_steps == 0) o.trainer.total_steps = static_cast<long>(batches) * o.epochs;
  if (o.warmup_epochs > 0)
    o.trainer.schedule.warmup_steps = static_cast<long>(o.warmup_epochs * static_cast<double>(batches));
  if (o.step_every_epochs > 0)
    o.trainer.schedule.step_every =
        std::max(1L, static_cast<long>(o.step_every_epochs * static_cast<double>(batches)));

  // One memory stack: one budget over the trainer, the libraries' workspaces and the loaders'
  // staging. The loaders are booked first, so the plan leaves them their room.
  stack = std::make_unique<memory::MemoryStack>(backend.device_memory(), backend.staging_memory(), o.trainer.memory);
  data::Loader::book(*stack, *train, train_options);
  if (validation) data::Loader::book(*stack, *validation, eval_options);
  if (test) data::Loader::book(*stack, *test, eval_options);
  trainer_ = std::make_unique<Trainer>(network, backend, *stack, o.trainer);
  train_loader = std::make_unique<data::Loader>(*train, train_options, *stack);
  if (validation) validation_loader = std::make_unique<data::Loader>(*validation, eval_options, *stack);
  if (test) test_loader = std::make_unique<data::Loader>(*test, eval_options, *stack);
}

void Fit::State::load_state() {
  if (!o.load.empty()) {
    load_starting_weights();
    trainer_->synchronize_replicas();
  }
  if (resumed) {
    load_parameters(o.resume, network, trainer_->parameters(), true);
    trainer_->restore(resumed->training->trainer);
    progress_ = resumed->training->progress;
    trainer_->synchronize_replicas();  // they read the same file; this makes sure
  }
  const std::uint64_t keep = resumed ? resumed_settings.value("metrics_bytes", std::uint64_t{0}) : 0;
  metrics = std::make_unique<MetricsFile>(writes ? o.metrics.string() : std::string(), keep);
  if (resumed && !metrics->kept()) detail::write_history(*metrics, progress_, train_loader->batches_per_epoch());
  if (!o.tensorboard.empty() && writes) {
    events = std::make_unique<detail::EventFile>(o.tensorboard);
    if (resumed) events->start_session(trainer_->steps() + 1);  // what came after the checkpoint goes
  }
}

// `load`: the same network's weights, or, from another network's (a new head), the layers that
// match, the others initialised; the note lists which.
void Fit::State::load_starting_weights() {
  const CheckpointInfo file = read_checkpoint(o.load);
  if (file.model.network == network_text(network)) {
    load_weights(o.load, network, trainer_->parameters());
    return;
  }
  if (!(file.model.input == network.input_shape()))
    throw ConfigError(o.load.string() + ": the weights of a network on " + file.model.input.str() +
                      " samples; this one takes " + network.input_shape().str());
  const WeightTransfer transfer = load_matching_weights(o.load, network, trainer_->parameters());
  if (transfer.loaded.empty())
    throw ConfigError(o.load.string() + ": no layer of its network matches this one's (the same place, kind and "
                      "parameter shapes): nothing to start from");
  if (!o.progress || !writes) return;
  std::cout << "loaded from " << o.load.string() << " (another network): "
            << plural(static_cast<long>(transfer.loaded.size()), "layer") << " with its weights; initialised: ";
  for (std::size_t i = 0; i < transfer.kept.size(); ++i) std::cout << (i ? ", " : "") << transfer.kept[i];
  std::cout << (transfer.kept.empty() ? "none\n" : "\n");
}

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
  if (o.keep_best || o.early_stop > 0)
    std::cout << "watching " << to_string(o.monitor) << " ("
              << (lower_is_better(o.monitor) ? "lower" : "higher") << " is better)"
              << (o.keep_best ? "; the best epoch kept in " + best_checkpoint_path(o.save).string() : std::string())
              << (o.early_stop > 0 ? "; stopping after " + plural(o.early_stop, "epoch") + " without a better one"
                                   : std::string())
              << "\n";
  std::cout << format_memory_table(trainer_->memory()) << std::flush;
}

// ---- the run ------------------------------------------------------------------------------------

FitResult Fit::State::run() {
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
  result.epochs_trained = std::max(0, static_cast<int>(progress_.epochs.size()) -
                                          static_cast<int>(std::count_if(
                                              progress_.epochs.begin(), progress_.epochs.end(),
                                              [&](const EpochRecord& e) { return e.epoch < first_epoch; })));
  if (!result.signal && test_loader) {
    const EpochRecord* last = progress_.epochs.empty() ? nullptr : &progress_.epochs.back();
    if (result.epochs_trained > 0 && last && last->test_loss && stop_reason.empty()) {  // tested with its epoch
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
  best_of(result);
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
  json line = {{"type", "step"}, {"epoch", progress_.epoch}, {"step", r.step}, {"loss", r.loss},
               {"accuracy", r.accuracy}, {"lr", decimal(r.learning_rate)}, {"micro_batch", r.micro_batch},
               {"micro_batches", r.micro_batches}, {"images_per_second", rate}, {"host_waits", r.host_waits},
               {"reserved_bytes", trainer_->memory_stack().statistics().current_bytes}};
  if (communicator) line["communication_seconds"] = r.communication_seconds;
  metrics->write(line);
  if (events)
    events->scalars(r.step, {{"train/loss", static_cast<float>(r.loss)},
                             {"train/accuracy", static_cast<float>(r.accuracy)},
                             {"learning_rate", r.learning_rate},
                             {"images_per_second", static_cast<float>(rate)},
                             {"memory/reserved_bytes",
                              static_cast<float>(trainer_->memory_stack().statistics().current_bytes)}});
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
  detail::ProgressBar eval_bar(split, loader->batches_per_epoch(), !show_bar());
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
  eval_bar.update(loader->batches_per_epoch(), 0, {});
  eval_bar.finish();
  if (!communicator && detail::stop_requested()) return std::nullopt;
  if (o.callbacks.on_evaluation) o.callbacks.on_evaluation(split, result, *this);
  return result;
}

// The epoch's evaluation, record and saves; a signal's number when a stop was asked during the
// evaluation, which is left unfinished: the run is saved at the epoch's last step, and a resumed
// run evaluates it.
int Fit::State::finish_epoch(FitResult& result) {
  std::optional<EvalResult> validated, tested;
  if (validation_loader && !(validated = evaluate(validation_loader.get(), "validation"))) return detail::stop_requested();
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
  }
  if (tested) {
    e.test_loss = tested->loss;
    e.test_accuracy = tested->accuracy;
  }
  e.seconds = progress_.seconds;
  e.images_per_second = progress_.seconds > 0 ? seen / progress_.seconds : 0;
  e.learning_rate = decimal(progress_.steps.empty() ? trainer_->learning_rate() : progress_.steps.back().learning_rate);
  if (o.progress && writes) {
    std::string line = "epoch " + std::to_string(e.epoch) + "/" + std::to_string(o.epochs) + ": train loss " +
                       fixed(e.train_loss) + " acc " + fixed(e.train_accuracy);
    if (validated) line += " | val loss " + fixed(validated->loss) + " acc " + fixed(validated->accuracy);
    if (tested) line += " | test loss " + fixed(tested->loss) + " acc " + fixed(tested->accuracy);
    char tail[64];
    std::snprintf(tail, sizeof tail, " | %.1fs, %.0f img/s", e.seconds, e.images_per_second);
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
    }
    if (tested) {
      scalars.emplace_back("epoch/test_loss", static_cast<float>(tested->loss));
      scalars.emplace_back("epoch/test_accuracy", static_cast<float>(tested->accuracy));
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
  if (!o.save.empty() && writes) save_to(o.save);
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
    if (result.test)
      std::cout << "test: loss " << fixed(result.test->loss) << " accuracy " << fixed(result.test->accuracy) << " ("
                << plural(static_cast<long>(result.test->samples), "sample") << ", the model after epoch " << finished << ")\n";
    std::printf("done: %s after %s (%s this run) in %.1fs (%.0f img/s training)\n",
                result.test ? ("test accuracy " + fixed(result.test->accuracy)).c_str() : "no test set",
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
  metrics->write({{"type", "summary"},
                  {"epochs", finished},
                  {"epochs_this_run", result.epochs_trained},
                  {"stopped_because", result.stopped_because},
                  {"best_epoch", result.best_epoch},
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
                  {"host_waits", host_waits}});
}

// ---- Fit ----------------------------------------------------------------------------------------

Fit::Fit(Network& network, Backend& backend, const FitData& data, FitOptions options)
    : s_(std::make_unique<State>(network, backend, std::move(options))) {
  State& s = *s_;
  check_options(s.o, data);
  try {
    s.settings = json::parse(s.o.settings);
  } catch (const json::exception& e) {
    throw ConfigError(std::string("fit: the application's settings are not JSON: ") + e.what());
  }
  if (!s.settings.is_object()) throw ConfigError("fit: the application's settings must be a JSON object");
  s.writes = !s.o.trainer.communicator || s.o.trainer.communicator->rank() == 0;
  if (!s.o.resume.empty()) {
    s.resumed = read_checkpoint(s.o.resume);
    if (!s.resumed->training)
      throw CheckpointError(s.o.resume.string() + ": a file of weights only, with no run to continue");
    try {
      s.resumed_settings = json::parse(s.resumed->training->settings);
    } catch (const json::exception& e) {
      throw CheckpointError(s.o.resume.string() + ": the run's settings cannot be read: " + e.what());
    }
    if (!s.resumed_settings.is_object())
      throw CheckpointError(s.o.resume.string() + ": the run's settings are not a JSON object");
  }
  s.open_data(data);
  s.describe_model_of_run();
  s.plan();
  s.load_state();
  s.print_start();
  if (s.o.callbacks.on_start) s.o.callbacks.on_start(*s.trainer_);
}

Fit::~Fit() = default;

FitResult Fit::run() { return s_->run(); }
Trainer& Fit::trainer() { return *s_->trainer_; }
const ModelDescription& Fit::model() const { return s_->model; }
const RunProgress& Fit::progress() const { return s_->progress_; }
const data::Dataset& Fit::training_data() const { return *s_->train; }
const data::Dataset* Fit::validation_data() const { return s_->validation; }
const data::Dataset* Fit::test_data() const { return s_->test; }

void Fit::save(const std::filesystem::path& path) {
  s_->drain();
  s_->save_to(path);
}

FitResult fit(Network& network, Backend& backend, const FitData& data, FitOptions options) {
  return Fit(network, backend, data, std::move(options)).run();
}

}  // namespace cnn
