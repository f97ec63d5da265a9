#pragma once
// Training a network in a few lines: a Fit runs the epochs of a run as train_images does. It
// builds the loaders from the options (the batch given once), holds out a validation split,
// evaluates on the validation set each epoch and on the test set at the end, keeps the best
// model by a watched metric, stops early, saves checkpoints a run resumes from (at every epoch's
// end, every few steps, and when SIGINT or SIGTERM asks it to stop), writes a metrics file and
// shows its progress. Callbacks on each step, evaluation and epoch may stop the run or change
// its learning rate. The step-level API (Trainer, data::Loader) is what it is built on, for a
// loop of one's own.
#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <cnnengine/data/dataset.hpp>
#include <cnnengine/data/loader.hpp>
#include <cnnengine/engine/core/backend_types.hpp>
#include <cnnengine/engine/core/network.hpp>
#include <cnnengine/engine/plan/memory_report.hpp>
#include <cnnengine/engine/train/trainer.hpp>
#include <cnnengine/fit/output_files.hpp>
#include <cnnengine/models/checkpoint.hpp>

namespace cnn {

// What a run watches to keep its best model and to stop early. The test set is never one: a model
// chosen by its test score has a biased test score.
enum class MonitoredMetric {
  validation_loss,
  validation_accuracy,
  train_loss,
  train_accuracy,
  // A task's validation scores (headline_scores): segment, multilabel, regress.
  validation_pixel_accuracy,
  validation_mean_iou,
  validation_mean_f1,
  validation_mean_average_precision,
  validation_mae,
  validation_rmse,
};
// "val_loss", "val_accuracy", "train_loss" or "train_accuracy" (Keras's names, with "loss" and
// "accuracy" for the training ones), or "val_" and a task's score: "val_pixel_accuracy",
// "val_mean_iou", "val_mean_f1", "val_mean_average_precision", "val_mae", "val_rmse"; "test_..."
// and anything else is an OptionError of "monitor" saying why.
MonitoredMetric parse_monitored_metric(std::string_view word);
std::string to_string(MonitoredMetric metric);
// The metric's value in an epoch's record, where that epoch measured it.
std::optional<double> monitored_value(MonitoredMetric metric, const EpochRecord& epoch);
// Whether the metric is measured on the validation set.
bool watches_validation(MonitoredMetric metric);
// An OptionError of "monitor" where a network of `task` does not give the metric (val_mean_iou of
// a classifier).
void check_monitored_metric(MonitoredMetric metric, Task task);

struct FitResult;

// What a callback is given: where the run is, and how to steer it.
class FitControl {
 public:
  virtual ~FitControl() = default;
  // Ends the run at the next step boundary (from on_step) or after this epoch's saves (from the
  // others), saved as at any epoch's end; FitResult::stopped_because gives `why`.
  virtual void stop(const std::string& why) = 0;
  // Whether a stop was asked already (by a callback, or by early stopping).
  virtual bool stopping() const = 0;
  // The rate of the next optimizer step; the schedule's shape goes on from it (the trainer's
  // learning-rate scale: kept in checkpoints, so a resumed run goes on at the same rates).
  virtual void set_learning_rate(float rate) = 0;
  virtual Trainer& trainer() = 0;
  virtual const RunProgress& progress() const = 0;  // the epoch in progress, every step and epoch so far
  virtual int epochs() const = 0;                   // the run's length
  virtual std::size_t batches_per_epoch() const = 0;
};

// What a run tells its callbacks, in order: on_start; on_run_begin; for each epoch, on_epoch_begin,
// on_step for each step, an on_evaluation_begin, on_evaluation_batch... and on_evaluation for
// each evaluation, on_epoch_end; the last evaluation of the test set; on_run_end. Every member may
// be empty. The run's own outputs (the progress, the metrics, CSV and TensorBoard files) and rules
// (the plateau schedule; early stopping, after the user's) are callbacks over the same events.
struct FitCallbacks {
  // After the trainer is planned and the run's state loaded, before step 1 (or the resumed step).
  std::function<void(Trainer&)> on_start;
  // After each optimizer step. A step's report may come one step late (Trainer::submit_step).
  std::function<void(const StepReport&, FitControl&)> on_step;
  // After each evaluation that finished (one a stop cut short has none).
  std::function<void(std::string_view split, const EvalResult&, FitControl&)> on_evaluation;
  // After each epoch's record, before its saves: a rate it sets is saved with the epoch.
  std::function<void(const EpochRecord&, FitControl&)> on_epoch_end;
  // The finer events, after the four above: the run's and each epoch's beginning, an
  // evaluation's course, the run's end.
  // When run() starts, before its first epoch.
  std::function<void(FitControl&)> on_run_begin;
  // Before the epoch's first step (or, for a resumed epoch, its next).
  std::function<void(int epoch, FitControl&)> on_epoch_begin;
  // Before an evaluation of `batches` batches: `split` is "validation" or "test".
  std::function<void(std::string_view split, std::size_t batches, FitControl&)> on_evaluation_begin;
  // As an evaluation goes: `done` of its batches taken, the next one coming (not after the last).
  std::function<void(std::string_view split, std::size_t done, FitControl&)> on_evaluation_batch;
  // At the end of run(), however it ended (an exception aside), with what it returns.
  std::function<void(const FitResult&, FitControl&)> on_run_end;
};

// A run's options: the trainer's (TrainerOptions: the batch, given once, for the loaders too; the
// memory budget; the optimizer, the schedule, the seed, the communicator of a data-parallel run;
// total_steps 0: the run's, from the epochs) and the run's own below.
struct FitOptions : TrainerOptions {
  int epochs = 10;
  // How training batches are drawn: shuffle, augmentation, normalisation, prefetch. Its batch,
  // seed and ranks are the trainer's (loader_options); evaluation takes its normalisation, in
  // order, unaugmented.
  data::LoaderOptions loading;
  // The schedule's warm-up and step period in epochs, made steps from the batches an epoch has
  // (0: the schedule's own, in steps).
  double warmup_epochs = 0, step_every_epochs = 0;

  // Held out of the training data for validation (above 0, below 1; 0: none): stratified, chosen by
  // the seed, recorded in the checkpoint, so that a resumed run holds out the same samples.
  double validation_split = 0;
  // Fine-tuning: from this epoch on (its start), the network's frozen layers (Network::
  // freeze_through) train too: the trainer is made again on the whole network, its plan anew, the
  // parameters and the trained layers' optimizer state carried over (the others' starts at zero,
  // as PyTorch's for a parameter's first gradient). A run resumed at or after it starts unfrozen.
  // 0: never. Needs frozen layers.
  int unfreeze_at = 0;
  std::size_t limit = 0;       // > 0: the training data's first this many samples (before the split)
  std::size_t limit_eval = 0;  // > 0: evaluate on the first this many of the validation and test sets

  // What keep_best, early_stop and the plateau schedule (schedule) watch.
  MonitoredMetric monitor = MonitoredMetric::validation_loss;
  bool keep_best = false;        // the best epoch's checkpoint in best_checkpoint_path(save)
  // With keep_best: at the end, the best epoch's weights back in the trainer (Keras's
  // restore_best_weights), and the test set evaluated with them. The run's checkpoint (save) stays
  // the last epoch's; Fit::save after run() saves the best weights with the last optimizer state.
  bool restore_best = false;
  int early_stop = 0;            // > 0: stop after this many epochs without a better monitored value
  bool test_each_epoch = false;  // else the test set is evaluated once, at the end

  std::filesystem::path save;     // the run's checkpoint (none: empty); written whole, never half
  long save_every = 0;            // > 0: also every this many optimizer steps
  std::filesystem::path resume;   // a checkpoint of this run to continue from where it stopped
  // Weights to start a new run from (not with resume): the same network's, or another's on the same
  // input (a new head): its layers that match load (load_matching_weights), the rest initialise.
  std::filesystem::path load;
  // With load: the last layer with parameters (the head) keeps its initialisation even where the
  // file holds one of its shape (a new head for as many classes as the file's).
  bool new_head = false;
  std::filesystem::path metrics;  // JSON lines: one a step, one an epoch, a summary
  std::filesystem::path csv;      // a row an epoch (Keras's CSVLogger's columns), rewritten whole each epoch
  // TensorBoard event files in this folder: the loss, accuracy, learning rate, memory reserved and
  // images/s of every step, and each epoch's metrics (`tensorboard --logdir` opens it).
  std::filesystem::path tensorboard;
  // Each of the above is checked before anything is planned (check_run_files): never a data file
  // or inside the data's folder, never a file of another kind, never another run's checkpoint (a
  // run's own: resume's), unless `overwrite` (then any file of the kind's path is replaced).
  bool overwrite = false;
  bool progress = true;           // the plan, a line an epoch and a summary on stdout
  bool progress_bar = true;       // with progress: a bar on stderr while training and evaluating
  bool stop_on_signal = true;     // SIGINT or SIGTERM: stop at the next step boundary, saved

  // What checkpoints describe. None: the network's, the training data's class names and the
  // loading's normalisation.
  std::optional<ModelDescription> model;
  // An application's own settings, a JSON object, kept in checkpoints (TrainingCheckpoint::settings,
  // beside what the run keeps there itself).
  std::string settings = "{}";
  FitCallbacks callbacks;
};

// The options of a loader that feeds a trainer with `options`: `loading` with the trainer's batch
// and seed, and its communicator's rank and ranks (the batch given once, in the trainer's options).
// Fit's training loader takes these; so does a loop of one's own. One of those four set in
// `loading` to another value than its default and the trainer's is an OptionError naming it.
data::LoaderOptions loader_options(const TrainerOptions& options, data::LoaderOptions loading = {});

// The data a run reads. Each must outlive the Fit.
struct FitData {
  FitData(const data::DatasetSplits& splits)  // NOLINT: a data set folder as opened is the usual data
      : train(splits.train.get()), validation(splits.validation.get()), test(splits.test.get()),
        inputs(data_inputs(splits)) {}
  FitData(const data::Dataset& train_data, const data::Dataset* validation_data = nullptr,
          const data::Dataset* test_data = nullptr)
      : train(&train_data), validation(validation_data), test(test_data) {}
  const data::Dataset* train;
  const data::Dataset* validation;  // none: FitOptions::validation_split, or no validation
  const data::Dataset* test;
  // What the data is read from, which nothing the run writes may replace or go inside: a folder
  // as opened, its files and the folder; none known for data sets of one's own.
  std::vector<PathUse> inputs;
};

struct FitResult {
  std::vector<EpochRecord> history;  // every finished epoch, a resumed run's earlier ones too
  int epochs_trained = 0;            // by this run() (a resumed run's earlier ones not counted)
  int best_epoch = 0;                // by the monitored metric; 0 where it was never measured
  std::optional<double> best_value;
  std::filesystem::path best_checkpoint;  // where keep_best kept it; empty without
  // Empty when every epoch ran; else why the run ended early ("early stop: ...", a callback's
  // reason, "signal 2").
  std::string stopped_because;
  int signal = 0;                  // the signal that stopped it, or 0
  std::optional<EvalResult> test;  // the test set's, with the model as it ended (or the best, restored)
  int tested_epoch = 0;            // the epoch whose model the test set evaluated
  double seconds = 0;              // this run()'s wall time
  long steps = 0;                  // the trainer's optimizer steps at the end
};

// Books room on `stack` for the loaders a Fit of `data` with `options` builds, as it does before its
// trainer plans: the training loader, and an evaluation loader for the validation side (its own, or
// the split held out of the training data) and for the test side where they hold samples. Returns
// the bytes; what `train_images --plan` shows without building a Fit.
std::size_t book_fit_loaders(memory::MemoryStack& stack, const FitData& data, const FitOptions& options);

// Where keep_best keeps the best checkpoint: NAME.best.EXT beside NAME.EXT.
std::filesystem::path best_checkpoint_path(const std::filesystem::path& save);

class Fit {
 public:
  // Checks the options and data, plans the trainer under the budget (memory::OutOfMemory or
  // BudgetTooSmall where it cannot fit), builds the loaders, and loads `resume` or `load`. An
  // option refused is an OptionError naming its field ("validation_split", "batch").
  // With progress on, prints the optimizer, the micro-batches and the memory table.
  Fit(Network& network, Backend& backend, const FitData& data, FitOptions options);
  ~Fit();
  Fit(const Fit&) = delete;
  Fit& operator=(const Fit&) = delete;

  // Trains the remaining epochs. A TrainingDiverged or an error ends it by exception, after the
  // last good state was saved where a checkpoint was asked for.
  FitResult run();

  // The trained model: its parameters (trainer().parameters()), evaluate and predict.
  Trainer& trainer();
  const ModelDescription& model() const;
  const RunProgress& progress() const;
  // The data each side reads, after the validation split and the limits.
  const data::Dataset& training_data() const;
  const data::Dataset* validation_data() const;
  const data::Dataset* test_data() const;
  // Writes the run's checkpoint (weights, optimizer state, position: a run resumes from it).
  void save(const std::filesystem::path& path);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// Fit(network, backend, data, options).run(): for a run whose result is its checkpoint.
FitResult fit(Network& network, Backend& backend, const FitData& data, FitOptions options);
// The same on the best device present (select_device(DeviceRequest{}): a usable GPU, else the
// CPU, in fp32), the reason printed first where the progress is shown.
FitResult fit(Network& network, const FitData& data, FitOptions options);

// ---- The learning-rate range test (Smith; fastai's lr_find): a short run whose rate grows
// exponentially each step, recording the loss, to see which rates learn.

struct LearningRateRangeOptions {
  float start = 1e-7f, end = 10.0f;  // the first and the last step's rate
  int steps = 100;
  double smoothing = 0.98;           // of the loss: an exponential moving average, debiased
  double divergence = 4.0;           // stop once the smoothed loss passes this many times its lowest
};

struct LearningRateRange {
  std::vector<float> rates;             // each step's rate
  std::vector<double> losses;           // each step's smoothed loss
  float suggestion = 0;                 // where the smoothed loss falls fastest against log(rate)
  float lowest_loss_rate = 0;           // where it is lowest (a rate ten times below is a safe choice)
  std::string ended;                    // why it ended: "the last rate", "the loss diverged", ...
};

// Trains a fresh trainer over `network` (from `options.load`'s weights where given; the network
// itself is left as it is) on the training data alone, at the rates of `range` (the options'
// schedule, validation, saves, callbacks and progress output are not used).
LearningRateRange find_learning_rate(Network& network, Backend& backend, const data::Dataset& training,
                                     FitOptions options, const LearningRateRangeOptions& range = {});

}  // namespace cnn
