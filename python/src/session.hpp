#pragma once
// A network with its device, its training options and its weights between calls: what the
// Python Model is, in C++. Each fit() is one Fit over the data given; the parameters, the
// optimizer's state and its step count carry from one fit() to the next (Keras's fit called
// again goes on training the same model). evaluate() and predict() plan a Predictor under the
// same budget for the call. Every call runs on a copy of the network, which the engine may
// rewrite (Network::commute_relu_and_max_pool): the model's own keeps its nodes as given. Nothing
// here knows of Python: the bindings hand in data sets and callbacks.
#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <cnnengine/backends/device/device.hpp>
#include <cnnengine/data/dataset.hpp>
#include <cnnengine/engine/core/network.hpp>
#include <cnnengine/engine/plan/memory_report.hpp>
#include <cnnengine/engine/train/trainer.hpp>
#include <cnnengine/fit/fit.hpp>
#include <cnnengine/models/checkpoint.hpp>

namespace cnn::python {

// What a plan says for a batch: the breakdown of the micro-batch chosen, and how a step runs.
struct PlanSummary {
  int batch = 0;
  int micro_batch = 0;            // 0: nothing fits the budget
  int micro_batches_per_step = 0;  // gradient accumulation: ceil(batch / micro_batch)
  MemoryBreakdown breakdown;       // at micro_batch (at 1 where nothing fits)
  std::string table;               // the table train_images prints
};

class Session {
 public:
  // `description` says what checkpoints record (class names, normalisation, the task's loss):
  // its network text and input are the network's.
  Session(Network network, const DeviceRequest& device, TrainerOptions options, ModelDescription description);
  // A model saved by save() or a run's checkpoint (or an ONNX file): its network, description and
  // weights; a run's optimizer state and step count too, so that fit() goes on from them.
  static std::unique_ptr<Session> load(const std::filesystem::path& file, const DeviceRequest& device,
                                       TrainerOptions options);

  const Network& network() const { return network_; }
  // Fine-tuning: nodes 1 to `through` frozen, running as `mode` says (Network::freeze_through).
  void freeze(int through, FrozenMode mode);
  // The task's loss options (the task itself is the model's: a ConfigError to change it).
  void set_loss(const LossOptions& loss);
  const ModelDescription& description() const { return description_; }
  void set_class_names(std::vector<std::string> names);
  void set_normalization(data::Normalization normalization);
  TrainerOptions& options() { return options_; }
  Backend& backend() { return *device_.backend; }
  const std::string& device_reason() const { return device_.reason; }
  std::string device_name() const;  // "cpu" or "cuda"

  // Trains on `data` with `options` (its TrainerOptions part is replaced by this session's, the
  // batch and total steps aside); `options.callbacks` are the caller's. Unless the options
  // resume or load a checkpoint, the run starts from this session's parameters and optimizer
  // state. However it ends, what the trainer holds at the end is kept (an exception rethrown).
  // A callback may evaluate, predict or save (with the weights as they are at that step), but
  // not fit again (ConfigError).
  FitResult fit(const FitData& data, FitOptions options);
  // The mean loss, accuracy and task scores over `data` (its images, normalised as described).
  ClassEvaluation evaluate(const data::Dataset& data, int batch);
  // The network's outputs for every sample of `images` (count x the output's elements), or with
  // `probabilities` what the task makes of them (Model::predictions).
  std::vector<float> predict(const data::Dataset& images, int batch, bool probabilities);
  // The plan of a training step of `batch` samples under the options' budget, allocating nothing.
  PlanSummary plan(int batch);

  // The weights and the description (cnn::load reads them). A file there that is not a
  // checkpoint, or another run's checkpoint (which a run could resume), is kept unless `overwrite`.
  void save(const std::filesystem::path& file, bool overwrite);
  // The network and weights as ONNX; a file there that is not one is kept unless `overwrite`.
  void export_onnx(const std::filesystem::path& file, bool overwrite);
  // The trainable parameters' count.
  std::size_t parameter_count() const;
  long steps() const { return state_.steps; }

 private:
  // The weights (and running statistics) as a Predictor starts them, when none are held yet.
  void ensure_parameters();
  // A Predictor under the options' budget for `max_batch` images, the weights in it, and the
  // loaders `book` reserves room for booked first.
  struct Inference;
  std::unique_ptr<Inference> inference(int max_batch, const data::Dataset* book, const data::LoaderOptions* loading);
  // What save and export_onnx write: the weights in a Predictor, the description of its network.
  struct Described;
  Described described();
  void keep_trainer_state(Trainer& trainer);
  void carry_into(Trainer& trainer) const;

  Network network_;
  DeviceChoice device_;
  TrainerOptions options_;
  ModelDescription description_;
  std::vector<float> parameters_;       // ParameterStore::download(): empty until trained or loaded
  std::vector<float> optimizer_state_;  // empty until trained
  TrainerState state_;
  // While fit() runs: its trainer, once planned (the weights a callback's predict() reads).
  bool fitting_ = false;
  Trainer* live_trainer_ = nullptr;
};

}  // namespace cnn::python
