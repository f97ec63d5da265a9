#include <cnnengine/fit/fit.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <vector>

#include <cnnengine/backends/device/device.hpp>
#include <cnnengine/base/error.hpp>
#include <cnnengine/engine/core/task_scores.hpp>
#include "fit/detail/fit_state.hpp"
#include <cnnengine/models/network_text.hpp>

namespace cnn {

using detail::number;
using detail::plural;
using nlohmann::json;

namespace {

// What the loaders would refuse, said of the option that sets it, before anything is planned.
void check_loading(const FitOptions& o) {
  if (o.batch <= 0)
    throw OptionError("batch", "Loader: batch must be positive, got " + std::to_string(o.batch));
  if (o.loading.prefetch < 0)
    throw OptionError("loading.prefetch",
                      "Loader: prefetch must be 0 or more, got " + std::to_string(o.loading.prefetch));
  if (o.loading.augment_crop_padding < 0)
    throw OptionError("loading.augment_crop_padding", "Loader: augment_crop_padding must be 0 or more, got " +
                                                          std::to_string(o.loading.augment_crop_padding));
  if (o.loading.threads < 1 || o.loading.threads > data::kMaxLoaderThreads)
    throw OptionError("loading.threads", "Loader: threads must be 1 to " + std::to_string(data::kMaxLoaderThreads) +
                                             ", got " + std::to_string(o.loading.threads));
  try {
    data::check_photo_augmentation(o.loading.photo);
  } catch (const ConfigError& e) {
    throw OptionError("loading.photo", e.what());
  }
  if (o.loading.photo.crop.enabled && o.loading.augment_crop_padding > 0)
    throw OptionError("loading.augment_crop_padding",
                      "Loader: the random resized crop (loading.photo.crop) and augment_crop_padding are two crops: "
                      "give one");
}

// A crop shifted by more than the image's side may hold none of it (the loader's rule).
void check_crop_padding(const FitOptions& o, const data::SampleShape& shape) {
  if (o.loading.augment_crop_padding > std::min(shape.height, shape.width))
    throw OptionError("loading.augment_crop_padding",
                      "Loader: augment_crop_padding of " + std::to_string(o.loading.augment_crop_padding) +
                          " is more than the " + data::to_string(shape) +
                          " images' side: a crop could hold none of the image");
}

void check_options(const FitOptions& o, const FitData& data) {
  if (!data.train) throw ConfigError("fit: no training data (null)");
  if (o.epochs < 1) throw OptionError("epochs", "fit: the run needs at least 1 epoch, not " + std::to_string(o.epochs));
  if (!(o.validation_split >= 0 && o.validation_split < 1))
    throw OptionError("validation_split",
                      "the validation split must be a fraction from 0 to below 1, not " + number(o.validation_split));
  if (o.validation_split > 0 && data.validation)
    throw OptionError("validation_split", "a validation split of " + number(o.validation_split) +
                                              " was asked for, but the data has its own validation set (" +
                                              data.validation->description() + "): one or the other");
  if (o.save_every < 0 || o.early_stop < 0)
    throw OptionError(o.save_every < 0 ? "save_every" : "early_stop",
                      "fit: save_every and early_stop count steps and epochs: 0 or more");
  if (!(o.warmup_epochs >= 0 && o.warmup_epochs <= o.epochs))
    throw OptionError("warmup_epochs", "fit: the warm-up of " + number(o.warmup_epochs) +
                                           " epochs must be from 0 to the run's " + std::to_string(o.epochs));
  if (!(std::isfinite(o.step_every_epochs) && o.step_every_epochs >= 0))
    throw OptionError("step_every_epochs", "fit: the step schedule's period of " + number(o.step_every_epochs) +
                                               " epochs must be a finite number of 0 (the schedule's own) or more");
  if (o.keep_best && o.save.empty())
    throw OptionError("keep_best", "keeping the best checkpoint needs a checkpoint path to keep it beside (save)");
  if (o.unfreeze_at < 0 || o.unfreeze_at > o.epochs)
    throw OptionError("unfreeze_at", "fit: the epoch to unfreeze at, " + std::to_string(o.unfreeze_at) +
                                         ", must be from 1 to the run's " + std::to_string(o.epochs) + " (0: never)");
  if (o.restore_best && !o.keep_best)
    throw OptionError("restore_best", "restoring the best epoch's weights needs them kept (keep_best)");
  if (!o.resume.empty() && !o.load.empty())
    throw OptionError("load", "a run is resumed (" + o.resume.string() + ") or starts from weights (" +
                                  o.load.string() + "), not both");
  if (o.new_head && o.load.empty())
    throw OptionError("new_head", "a new head leaves out the head of the weights a run starts from (load): give them");
  const bool validated = o.validation_split > 0 || (data.validation && data.validation->size() > 0);
  const bool watches_validation = cnn::watches_validation(o.monitor);
  const bool plateau = o.schedule.kind == ScheduleKind::plateau;
  if ((o.keep_best || o.early_stop > 0 || plateau) && watches_validation && !validated) {
    // The option that asked for the watch, as the message names it.
    const auto [field, watcher] = o.keep_best        ? std::pair("keep_best", "keeping the best model")
                                  : o.early_stop > 0 ? std::pair("early_stop", "stopping early")
                                                     : std::pair("schedule.kind", "the plateau schedule");
    throw OptionError(field, std::string(watcher) + " watches " + to_string(o.monitor) +
                                 " (`monitor`), and this run has no validation set: hold out a validation split "
                                 "(`validation_split`, e.g. 0.1), give a val/ folder beside train/ and test/, or "
                                 "watch train_loss; the test set never chooses the model");
  }
  check_loading(o);
}

// Each side of the data against the network, before anything is planned: what the command line
// says with the flags that fix it, the library says with the shapes (a network on other samples
// read past the end of every batch).
void check_network_fits_data(const Network& net, const data::Dataset& data, const char* side) {
  const data::SampleShape s = data.shape();
  const Shape sample{s.channels, s.height, s.width};
  const std::string of_data = std::string("the ") + side + " data (" + data.description() + ")";
  if (!(sample == net.input_shape()))
    throw ShapeError("fit: the network takes " + net.input_shape().str() + " samples, and " + of_data + " gives " +
                     sample.str() + ": build the network for the data's samples (or resize the images)");
  if (data.task() != net.task())
    throw ConfigError("fit: the network is trained to " + to_string(net.task()) +
                      " (its loss: Network::set_loss), and " + of_data + " holds " + to_string(data.task()) +
                      " targets");
  if (data.num_classes() != net.num_classes())
    throw ShapeError("fit: the network gives " + std::to_string(net.num_classes()) +
                     (net.task() == Task::regress ? " targets" : " classes") + ", and " + of_data + " has " +
                     std::to_string(data.num_classes()));
}

// A segmentation whose every training pixel is ignored (kIgnoreMask) or weighs 0 trains on
// nothing: its loss is 0 from the first step and it would end "trained". The scan ends at the
// first pixel that counts, in the first mask as a rule.
void check_something_to_learn(const Network& net, const data::Dataset& train) {
  if (net.task() != Task::segment) return;
  const std::vector<float>& weights = net.loss().class_weights;
  std::vector<std::uint8_t> mask(net.target_bytes());
  for (std::size_t i = 0; i < train.size(); ++i) {
    train.load_target(i, mask.data());
    for (std::uint8_t value : mask)
      if (value != kIgnoreMask && (weights.empty() || (value < weights.size() && weights[value] > 0))) return;
  }
  throw DataError("fit: every pixel of the " + std::to_string(train.size()) + " training masks (" +
                  train.description() + ") is " +
                  (weights.empty() ? "ignored (" + std::to_string(kIgnoreMask) + ")"
                                   : "ignored (" + std::to_string(kIgnoreMask) + ") or of a class whose weight is 0") +
                  ": there is nothing to learn from");
}

// What the run writes, against what it reads, before anything is planned: a run must not train
// for an hour and then fail to save, nor save over its data or another run's checkpoint.
void check_outputs(const FitOptions& o, const FitData& data) {
  RunFiles files;
  if (!o.save.empty()) files.outputs.push_back({"FitOptions::save", o.save, OutputKind::checkpoint, "save"});
  if (!o.save.empty() && o.keep_best)
    files.outputs.push_back(
        {"FitOptions::keep_best", best_checkpoint_path(o.save), OutputKind::checkpoint, "keep_best"});
  if (!o.metrics.empty()) files.outputs.push_back({"FitOptions::metrics", o.metrics, OutputKind::metrics, "metrics"});
  if (!o.csv.empty()) files.outputs.push_back({"FitOptions::csv", o.csv, OutputKind::csv, "csv"});
  if (!o.tensorboard.empty())
    files.outputs.push_back({"FitOptions::tensorboard", o.tensorboard, OutputKind::folder, "tensorboard"});
  files.inputs = data.inputs;
  if (!o.load.empty()) files.inputs.push_back({"FitOptions::load", o.load});
  if (!o.resume.empty()) files.inputs.push_back({"FitOptions::resume", o.resume});
  files.may_replace = {{"FitOptions::save", "FitOptions::load"}, {"FitOptions::save", "FitOptions::resume"}};
  if (!o.resume.empty()) files.own_checkpoints = {o.resume, best_checkpoint_path(o.resume)};
  files.overwrite = o.overwrite;
  files.overwrite_option = "FitOptions::overwrite";
  files.resume_option = "FitOptions::resume =";
  check_run_files(files);
}

}  // namespace

data::LoaderOptions loader_options(const TrainerOptions& options, data::LoaderOptions loading) {
  const data::LoaderOptions defaults;
  const int rank = options.communicator ? options.communicator->rank() : 0;
  const int ranks = options.communicator ? options.communicator->ranks() : 1;
  // A field set apart from the trainer's would be silently replaced: refused, naming both.
  const auto check = [](const char* field, auto given, auto fallback, auto trainers, const char* set_instead) {
    if (given != fallback && given != trainers)
      throw OptionError(std::string("loading.") + field,
                        std::string("the loader's ") + field + " is the trainer's (" + std::to_string(trainers) +
                            "), not " + std::to_string(given) + ": set " + set_instead + " alone");
  };
  check("batch", loading.batch, defaults.batch, options.batch, "batch");
  check("seed", loading.seed, defaults.seed, options.seed, "seed");
  check("rank", loading.rank, defaults.rank, rank, "the communicator");
  check("ranks", loading.ranks, defaults.ranks, ranks, "the communicator");
  loading.batch = options.batch;
  loading.seed = options.seed;
  loading.rank = rank;
  loading.ranks = ranks;
  return loading;
}

namespace {

// An evaluation's loader: the training one's batch and normalisation, in order, unaugmented, whole.
data::LoaderOptions evaluation_loader_options(data::LoaderOptions training) {
  training.shuffle = false;
  training.drop_last = false;
  training.augment_flip = false;
  training.augment_crop_padding = 0;
  training.photo = {};  // evaluated as the model will see images: framed, not cropped at random
  return training;
}

}  // namespace

std::size_t book_fit_loaders(memory::MemoryStack& stack, const FitData& data, const FitOptions& options) {
  const data::LoaderOptions training = loader_options(options, options.loading);
  const data::LoaderOptions evaluation = evaluation_loader_options(training);
  std::size_t booked = data::Loader::book(stack, *data.train, training);
  const bool held_out = !data.validation && options.validation_split > 0;  // the same samples' shape
  if (held_out || (data.validation && data.validation->size() > 0))
    booked += data::Loader::book(stack, held_out ? *data.train : *data.validation, evaluation);
  if (data.test && data.test->size() > 0) booked += data::Loader::book(stack, *data.test, evaluation);
  return booked;
}

std::filesystem::path best_checkpoint_path(const std::filesystem::path& save) {
  std::filesystem::path best = save.parent_path() / save.stem();
  best += ".best" + save.extension().string();
  return best;
}


void Fit::State::open_data(const FitData& data) {
  double fraction = o.validation_split;
  std::uint64_t seed = o.seed;
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
    throw OptionError("validation_split", o.resume.string() +
                                              ": the run held out no validation split; a split now would move samples "
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
      throw OptionError("resume",
                        "the resumed run held out a validation split, and the data now has its own validation set (" +
                            validation->description() + ")");
    data::ValidationSplit split;
    try {
      split = data::split_for_validation(*train, fraction, seed);
    } catch (const ConfigError& e) {  // a side left with no sample
      if (resumed) throw;               // the run's own split, on data that changed
      throw OptionError("validation_split", e.what());
    }
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
    model.preprocessing.resize_shorter_side = train->resize_shorter_side();
  }
  try {
    data::check_normalization(model.preprocessing.normalization, train->shape().channels);
  } catch (const ConfigError& e) {
    if (resumed) throw;  // the run's own, not an option's
    throw OptionError(o.model ? "model" : "loading.normalization", e.what());
  }
  // A class's label is its place in the list: the same names in another order would relabel them.
  if (resumed && !model.class_names.empty() && model.class_names != train->class_names()) {
    std::string run, now;
    for (const std::string& name : model.class_names) run += (run.empty() ? "" : ", ") + name;
    for (const std::string& name : train->class_names()) now += (now.empty() ? "" : ", ") + name;
    throw OptionError("resume", o.resume.string() + ": the run's classes are " + run + "; the data now has " + now);
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
    throw OptionError("batch", "synchronised BatchNorm: the training set's " + std::to_string(samples) +
                                           " samples make one batch, which cannot be shared evenly over the " +
                                           std::to_string(ranks) +
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
  communicator = o.communicator;
  train_options = loader_options(o, o.loading);
  const int ranks = train_options.ranks;
  writes = train_options.rank == 0;
  train_options.normalization = model.preprocessing.normalization;
  eval_options = evaluation_loader_options(train_options);
  const std::size_t samples = train->size(), rest = samples % static_cast<std::size_t>(std::max(1, o.batch));
  // A run resumed where it had unfrozen trains every layer from the start; one that will unfreeze
  // draws batches that suit every layer (BatchNorm's two samples) from the start.
  if (o.unfreeze_at > 0 && resumed && resumed->training->progress.epoch >= o.unfreeze_at) network.freeze_through(0);
  const TrainingBatchNeed need = [&] {
    if (o.unfreeze_at <= 0 || network.frozen_through() == 0) return network.training_batch_need();
    const UnfrozenWhile whole(network);
    return network.training_batch_need();
  }();
  if (const std::string why = last_batch_left_out(o, need, samples, ranks);
      !why.empty()) {
    train_options.drop_last = true;
    if (o.progress && writes)
      std::cout << "note: each epoch's last batch (" << plural(static_cast<long>(rest), "sample")
                << ") is left out, a different one each epoch" << why << "\n";
  }
  const std::size_t batches = data::Loader::batches_per_epoch_for(*train, train_options);
  if (o.total_steps == 0) o.total_steps = static_cast<long>(batches) * o.epochs;
  if (o.warmup_epochs > 0)
    o.schedule.warmup_steps = static_cast<long>(o.warmup_epochs * static_cast<double>(batches));
  if (o.step_every_epochs > 0)
    o.schedule.step_every =
        std::max(1L, static_cast<long>(o.step_every_epochs * static_cast<double>(batches)));

  // One memory stack: one budget over the trainer, the libraries' workspaces and the loaders'
  // staging. The loaders are booked first, so the plan leaves them their room.
  stack = std::make_unique<memory::MemoryStack>(backend.device_memory(), backend.staging_memory(), memory_options(o));
  book_fit_loaders(*stack, FitData(*train, validation, test), o);
  if (o.unfreeze_at > 0 && network.frozen_through() > 0) check_unfrozen_fits();
  trainer_ = std::make_unique<Trainer>(network, backend, *stack, o);
  train_loader = std::make_unique<data::Loader>(*train, train_options, *stack);
  if (validation) validation_loader = std::make_unique<data::Loader>(*validation, eval_options, *stack);
  if (test) test_loader = std::make_unique<data::Loader>(*test, eval_options, *stack);
}

// A run that will unfreeze must fit the whole network's training too: refused before step 1, not
// at that epoch. The whole network's trainer is made once (its plan and reservations) and given
// back.
void Fit::State::check_unfrozen_fits() {
  {
    const UnfrozenWhile unfrozen(network);
    try {
      Trainer whole(network, backend, *stack, o);
    } catch (const BudgetTooSmall& e) {
      throw BudgetTooSmall("unfreezing at epoch " + std::to_string(o.unfreeze_at) + ": " + e.what(), e.details());
    }
  }
  stack->release_step_buffers();
}

// Note [Unfreezing]: the trainer is made again on the whole network, under the same memory stack
// (the old one's reservations given back first, the loaders' kept). The parameter block is laid out
// alike frozen or not; the optimizer's slots cover the trained floats, which are the last ones of
// the trainable floats, so each slot's old values go to its end, after the newly trained floats'
// zeros. The trainer's state (its steps, the schedule's position, the loss scale) carries over;
// its micro-batch is the new plan's. An epoch's steps have all been drained when the next begins.
void Fit::State::unfreeze() {
  if (o.unfreeze_at <= 0 || progress_.epoch < o.unfreeze_at || network.frozen_through() == 0) return;
  using Block = ParameterStore::Block;
  const int frozen = network.frozen_through();
  const ParameterStore& before = trainer_->parameters();
  const std::vector<float> parameters = before.download();
  const std::size_t trained_before = before.trained().elements();
  std::vector<float> slots(before.floats(Block::optimizer_state));
  before.download(Block::optimizer_state, 0, slots.size(), slots.data());
  const TrainerState state = trainer_->state();
  trainer_.reset();
  stack->release_step_buffers();  // an arena strategy's, sized for the frozen plan
  network.freeze_through(0);
  trainer_ = std::make_unique<Trainer>(network, backend, *stack, o);
  ParameterStore& after = trainer_->parameters();
  after.upload(parameters);
  const std::size_t trained = after.trained().elements(), newly = trained - trained_before;
  for (std::size_t k = 0; trained_before > 0 && k < slots.size() / trained_before; ++k)
    after.upload(Block::optimizer_state, k * trained + newly, trained_before, slots.data() + k * trained_before);
  TrainerState carried = state;  // the micro-batch is the new plan's
  carried.micro_batch = trainer_->micro_batch();
  carried.good_steps = 0;
  trainer_->restore(carried);
  trainer_->synchronize_replicas();
  if (o.progress && writes)
    std::cout << "epoch " << progress_.epoch << ": nodes 1 to " << frozen << " unfrozen; every layer trains, micro-batch "
              << trainer_->micro_batch() << " (planned again)\n";
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
  build_callbacks();
}

// The run's outputs (on the rank that writes) and rules as callbacks, the user's among them: one
// list, called in order. The logs come first: an epoch's line is written before the rules change
// the rate; early stopping comes last, after what a user's callback says of the epoch.
void Fit::State::build_callbacks() {
  const bool distributed = communicator != nullptr;
  if (writes && o.progress) {
    progress_log = std::make_unique<detail::ProgressLog>(detail::ProgressLog::Settings{
        .bar = o.progress_bar, .task = network.task(), .monitor = o.monitor, .save = o.save,
        .distributed = distributed});
    callbacks.push_back(progress_log->callbacks());
  }
  if (writes && !o.metrics.empty()) {
    std::size_t data_bytes = train->host_bytes();
    if (validation) data_bytes += validation->host_bytes();
    if (test) data_bytes += test->host_bytes();
    metrics_log = std::make_unique<detail::MetricsLog>(
        detail::MetricsLog::Settings{
            .path = o.metrics.string(),
            .keep_bytes = resumed ? resumed_settings.value("metrics_bytes", std::uint64_t{0}) : 0,
            .resumed = resumed ? &progress_ : nullptr,
            .batches_per_epoch = train_loader->batches_per_epoch(),
            .distributed = distributed,
            .monitor = o.monitor,
            .batch = o.batch,
            .data_set_host_bytes = data_bytes,
            .summary_after_signal = !o.progress},
        backend);
    callbacks.push_back(metrics_log->callbacks());
  }
  if (writes && !o.tensorboard.empty()) {
    tensorboard_log = std::make_unique<detail::TensorBoardLog>(
        o.tensorboard, resumed ? std::optional<long>(trainer_->steps() + 1) : std::nullopt);
    callbacks.push_back(tensorboard_log->callbacks());
  }
  if (writes && !o.csv.empty()) {
    csv_log = std::make_unique<detail::CsvLog>(o.csv);
    callbacks.push_back(csv_log->callbacks());
  }
  const bool announce = o.progress && writes;
  if (o.schedule.kind == ScheduleKind::plateau) {
    plateau = std::make_unique<detail::PlateauSchedule>(o.schedule, o.monitor, announce);
    callbacks.push_back(plateau->callbacks());
  }
  callbacks.push_back(o.callbacks);
  if (o.early_stop > 0) {
    early_stopping = std::make_unique<detail::EarlyStopping>(o.early_stop, o.monitor, announce);
    callbacks.push_back(early_stopping->callbacks());
  }
}

// `load`: the same network's weights, or, from another network's (a new head), the layers that
// match, the others initialised; the note lists which.
void Fit::State::load_starting_weights() {
  const CheckpointInfo file = read_checkpoint(o.load);
  if (file.model.network == network_text(network) && !o.new_head) {
    load_weights(o.load, network, trainer_->parameters());
    return;
  }
  if (!(file.model.input == network.input_shape()))
    throw OptionError("load", o.load.string() + ": the weights of a network on " + file.model.input.str() +
                                  " samples; this one takes " + network.input_shape().str());
  const int through = o.new_head ? network.head() - 1 : -1;  // -1: every node
  const WeightTransfer transfer = load_matching_weights(o.load, network, trainer_->parameters(), through);
  if (transfer.loaded.empty())
    throw OptionError("load", o.load.string() +
                                  ": no layer of its network matches this one's (the same place, kind and "
                                  "parameter shapes): nothing to start from");
  if (!o.progress || !writes) return;
  std::cout << "loaded from " << o.load.string() << (o.new_head ? " (a new head)" : " (another network)") << ": "
            << plural(static_cast<long>(transfer.loaded.size()), "layer") << " with its weights; initialised: ";
  for (std::size_t i = 0; i < transfer.kept.size(); ++i) std::cout << (i ? ", " : "") << transfer.kept[i];
  std::cout << (transfer.kept.empty() ? "none\n" : "\n");
}

// ---- Fit ----------------------------------------------------------------------------------------

Fit::Fit(Network& network, Backend& backend, const FitData& data, FitOptions options)
    : s_(std::make_unique<State>(network, backend, std::move(options))) {
  State& s = *s_;
  check_options(s.o, data);
  check_monitored_metric(s.o.monitor, network.task());
  try {
    s.settings = json::parse(s.o.settings);
  } catch (const json::exception& e) {
    throw OptionError("settings", std::string("fit: the application's settings are not JSON: ") + e.what());
  }
  if (!s.settings.is_object()) throw OptionError("settings", "fit: the application's settings must be a JSON object");
  if (s.o.unfreeze_at > 0 && network.frozen_through() == 0)
    throw OptionError("unfreeze_at", "fit: unfreezing at epoch " + std::to_string(s.o.unfreeze_at) +
                                         " needs frozen layers (Network::freeze_through)");
  s.writes = !s.o.communicator || s.o.communicator->rank() == 0;
  if (s.writes) check_outputs(s.o, data);
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
  network.check_loss();
  s.open_data(data);
  check_network_fits_data(network, *s.train, "training");
  if (s.validation) check_network_fits_data(network, *s.validation, "validation");
  if (s.test) check_network_fits_data(network, *s.test, "test");
  check_crop_padding(s.o, s.train->shape());
  check_something_to_learn(network, *s.train);
  s.describe_model_of_run();
  s.plan();
  s.load_state();
  s.print_start();
  s.notify(&FitCallbacks::on_start, *s.trainer_);
}

Fit::~Fit() = default;

// A run that ends on an error says what its checkpoint holds: the state before the run, or the
// run's own last save (--save-every, an epoch's end), which a user must not take for the former.
FitResult Fit::run() {
  try {
    return s_->run();
  } catch (const TrainingDiverged& diverged) {
    throw TrainingDiverged(diverged, s_->saved_file_state());
  } catch (const CheckpointError& e) {  // a save refused (weights not finite) or failed
    if (s_->saved_step < 0) throw;        // the writer says what the file is
    throw CheckpointError(e.what() + s_->saved_file_state());
  }
}
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

FitResult fit(Network& network, const FitData& data, FitOptions options) {
  const DeviceChoice device = select_device(DeviceRequest{});
  const bool writes = !options.communicator || options.communicator->rank() == 0;
  if (options.progress && writes) std::cout << device.reason << "\n";
  return fit(network, *device.backend, data, std::move(options));
}

}  // namespace cnn

