#include "session.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <tuple>
#include <utility>

#include <cnnengine/data/loader.hpp>
#include <cnnengine/engine/core/backend.hpp>
#include <cnnengine/engine/core/parameter_store.hpp>
#include <cnnengine/engine/infer/predictor.hpp>
#include <cnnengine/engine/train/training_diverged.hpp>
#include <cnnengine/fit/output_files.hpp>
#include <cnnengine/fit/output_kinds.hpp>
#include <cnnengine/memory/memory_stack.hpp>
#include <cnnengine/models/model.hpp>
#include <cnnengine/models/network_text.hpp>
#include <cnnengine/models/onnx_export.hpp>
#include "engine/plan/batch_planner.hpp"
#include "engine/train/planning_options.hpp"
#include "network_copy.hpp"

namespace cnn::python {

using Block = ParameterStore::Block;

namespace {

// `count` samples of what `network` takes, to size a training loader's staging before any data is
// given (Model.plan): their shape, task and classes; nothing is ever loaded.
class SamplesOf final : public data::Dataset {
 public:
  SamplesOf(const Network& network, int count)
      : shape_{network.input_shape()[0], network.input_shape()[1], network.input_shape()[2]},
        task_(network.task()), classes_(network.num_classes()), count_(static_cast<std::size_t>(count)) {}
  std::size_t size() const override { return count_; }
  data::SampleShape shape() const override { return shape_; }
  Task task() const override { return task_; }
  int num_classes() const override { return classes_; }
  std::vector<std::string> class_names() const override { return {}; }
  std::string description() const override { return "samples of the network's input, to plan"; }
  int load(std::size_t, float*) const override { throw std::logic_error("SamplesOf holds no samples"); }
  std::size_t host_bytes() const override { return 0; }

 private:
  data::SampleShape shape_;
  Task task_;
  int classes_;
  std::size_t count_;
};

}  // namespace

struct Session::Inference {
  Inference(const Network& model, Backend& backend, const TrainerOptions& options)
      : network(copy_network(model)), stack(memory_stack_for(backend, memory_options(options))) {}
  Network network;
  memory::MemoryStack stack;
  std::unique_ptr<Predictor> predictor;
};

Session::Session(Network network, const DeviceRequest& device, TrainerOptions options, ModelDescription description)
    : network_(std::move(network)), device_(select_device(device)), options_(std::move(options)),
      description_(std::move(description)) {
  network_.check_loss();
  const ModelDescription own = describe_model(network_);
  description_.network = own.network;
  description_.input = own.input;
  description_.loss = network_.loss();
  if (description_.preprocessing.shape.elements() == 0) description_.preprocessing.shape = own.preprocessing.shape;
}

std::unique_ptr<Session> Session::load(const std::filesystem::path& file, const DeviceRequest& device,
                                       TrainerOptions options) {
  const CheckpointInfo info = read_checkpoint(file);
  Network network = checkpoint_network(info, file);
  auto session = std::make_unique<Session>(std::move(network), device, std::move(options), info.model);
  const std::unique_ptr<Inference> held = session->inference(1, nullptr, nullptr);
  load_parameters(file, held->network, held->predictor->parameters());
  session->parameters_ = held->predictor->parameters().download();
  return session;
}

std::string Session::device_name() const { return to_string(device_.backend->kind()); }

void Session::set_class_names(std::vector<std::string> names) {
  if (static_cast<int>(names.size()) != network_.num_classes())
    throw ConfigError("class_names: " + std::to_string(names.size()) + " names for the network's " +
                      std::to_string(network_.num_classes()) + " outputs");
  description_.class_names = std::move(names);
}

void Session::set_normalization(data::Normalization normalization) {
  data::check_normalization(normalization, description_.input[0]);
  description_.preprocessing.normalization = std::move(normalization);
}

void Session::freeze(int through, FrozenMode mode) {
  network_.set_frozen_mode(mode);
  network_.freeze_through(through);
}

void Session::set_loss(const LossOptions& loss) {
  if (loss.task != network_.task())
    throw OptionError("task", "task: the model is trained to " + to_string(network_.task()) + ", not to " +
                                  to_string(loss.task));
  Network checked = copy_network(network_);
  checked.set_loss(loss);
  checked.check_loss();
  network_.set_loss(loss);
  description_.loss = loss;
}

std::unique_ptr<Session::Inference> Session::inference(int max_batch, const data::Dataset* book,
                                                       const data::LoaderOptions* loading) {
  auto held = std::make_unique<Inference>(network_, backend(), options_);
  if (book != nullptr) data::Loader::book(held->stack, *book, *loading);
  const ModelOptions model{.max_batch = max_batch, .memory_budget = options_.memory_budget};
  held->predictor = std::make_unique<Predictor>(held->network, backend(), held->stack,
                                                inference_options(model, held->stack, backend()));
  if (!parameters_.empty()) held->predictor->parameters().upload(parameters_);
  return held;
}

void Session::ensure_parameters() {
  if (live_trainer_ != nullptr) {
    parameters_ = live_trainer_->parameters().download();
    return;
  }
  if (!parameters_.empty()) return;
  parameters_ = inference(1, nullptr, nullptr)->predictor->parameters().download();
}

void Session::keep_trainer_state(Trainer& trainer) {
  if (trainer.step_pending()) return;  // an error mid-step: the state before it is not whole
  const ParameterStore& params = trainer.parameters();
  std::vector<float> parameters = params.download();
  std::vector<float> slots(params.floats(Block::optimizer_state));
  params.download(Block::optimizer_state, 0, slots.size(), slots.data());
  state_ = trainer.state();
  parameters_ = std::move(parameters);
  optimizer_state_ = std::move(slots);
}

// Note [Fit after fit]: a Fit plans a new trainer, which starts from its own initialisation. A
// model already trained goes on from its weights, its optimizer's moments and step count (AdamW's
// bias correction and the schedule count the steps), as a Keras model's fit() called again does.
// The micro-batch is the new plan's. Where the trained parameters are not those of the last run
// (a layer frozen or unfrozen since), the optimizer starts afresh, as PyTorch's does for a new
// parameter group.
void Session::carry_into(Trainer& trainer) const {
  ParameterStore& params = trainer.parameters();
  params.upload(parameters_);
  if (optimizer_state_.empty() || optimizer_state_.size() != params.floats(Block::optimizer_state)) return;
  params.upload(Block::optimizer_state, 0, optimizer_state_.size(), optimizer_state_.data());
  TrainerState carried = state_;
  carried.micro_batch = trainer.micro_batch();
  carried.good_steps = 0;
  trainer.restore(carried);
}

FitResult Session::fit(const FitData& data, FitOptions options) {
  if (fitting_) throw ConfigError("fit: the model is training already (fit called from a callback of its fit)");
  const int batch = options.batch;
  static_cast<TrainerOptions&>(options) = options_;
  options.batch = batch;
  options.loading.normalization = description_.preprocessing.normalization;
  ModelDescription model = description_;
  if (model.class_names.empty()) model.class_names = data.train->class_names();
  options.model = std::move(model);
  const bool carry = options.resume.empty() && options.load.empty() && !parameters_.empty();
  const std::function<void(Trainer&)> user_start = options.callbacks.on_start;
  options.callbacks.on_start = [this, carry, user_start](Trainer& trainer) {
    if (carry) carry_into(trainer);
    live_trainer_ = &trainer;
    if (user_start) user_start(trainer);
  };
  // Before each event, the run's trainer as it is then: a frozen network's is made again when it
  // unfreezes.
  auto track = [this](auto& event) {
    auto user = event;
    event = [this, user](auto&&... args) {
      live_trainer_ = &std::get<sizeof...(args) - 1>(std::forward_as_tuple(args...)).trainer();
      if (user) user(args...);
    };
  };
  FitCallbacks& c = options.callbacks;
  track(c.on_run_begin);
  track(c.on_epoch_begin);
  track(c.on_step);
  track(c.on_evaluation_begin);
  track(c.on_evaluation_batch);
  track(c.on_evaluation);
  track(c.on_epoch_end);
  track(c.on_run_end);
  fitting_ = true;
  struct Done {
    Session& s;
    ~Done() {
      s.fitting_ = false;
      s.live_trainer_ = nullptr;
    }
  } done{*this};
  Network working = copy_network(network_);
  std::unique_ptr<Fit> run;
  try {
    run = std::make_unique<Fit>(working, backend(), data, std::move(options));
    FitResult result = run->run();
    live_trainer_ = nullptr;
    keep_trainer_state(run->trainer());
    return result;
  } catch (const TrainingDiverged& e) {
    // The step before the one refused may have left the weights not finite (its loss was
    // measured before its update): the model keeps those it had before this fit.
    live_trainer_ = nullptr;
    throw TrainingDiverged(e, "; the model keeps its weights from before this fit");
  } catch (...) {
    live_trainer_ = nullptr;
    try {
      if (run) keep_trainer_state(run->trainer());
    } catch (const std::exception&) {  // the trainer is gone: the weights before the run stay
    }
    throw;
  }
}

ClassEvaluation Session::evaluate(const data::Dataset& data, int batch) {
  ensure_parameters();
  data::LoaderOptions loading;
  loading.batch = batch;
  loading.shuffle = false;
  loading.normalization = description_.preprocessing.normalization;
  // Under a budget, the loader's batches shrink until they and the forward pass fit: the
  // evaluation's batch is only how many samples are staged at once.
  std::unique_ptr<Inference> held;
  for (;;) {
    try {
      held = inference(loading.batch, &data, &loading);
      break;
    } catch (const memory::OutOfMemory&) {
      if (options_.memory_budget == 0 || loading.batch == 1) throw;
      loading.batch /= 2;
    }
  }
  data::Loader loader(data, loading, held->stack);
  return held->predictor->evaluate_classes([&loader] { return loader.next(); });
}

std::vector<float> Session::predict(const data::Dataset& images, int batch, bool probabilities) {
  const data::SampleShape shape = images.shape();
  const Shape input = network_.input_shape();
  if (!(Shape{shape.channels, shape.height, shape.width} == input))
    throw ShapeError("predict: the samples are " + data::to_string(shape) + ", and the network takes " + input.str());
  ensure_parameters();
  const std::unique_ptr<Inference> held = inference(batch, nullptr, nullptr);
  Predictor& predictor = *held->predictor;
  const std::size_t in = shape.elements(), out = network_.output_shape().elements();
  const std::size_t micro = static_cast<std::size_t>(predictor.micro_batch());
  std::vector<float> staged(micro * in);
  std::vector<float> outputs(images.size() * out);
  for (std::size_t first = 0; first < images.size(); first += micro) {
    const std::size_t count = std::min(micro, images.size() - first);
    for (std::size_t i = 0; i < count; ++i) {
      float* sample = staged.data() + i * in;
      images.load(first + i, sample);
      data::normalize(sample, shape, description_.preprocessing.normalization);
    }
    predictor.logits(staged.data(), static_cast<int>(count), outputs.data() + first * out);
  }
  if (!probabilities) return outputs;
  const int classes = network_.num_classes();
  switch (network_.task()) {
    case Task::classify: softmax_rows(outputs, classes); break;
    case Task::segment: softmax_channels(outputs, classes, out / static_cast<std::size_t>(classes)); break;
    case Task::multilabel:
      for (float& v : outputs) v = 1.0f / (1.0f + std::exp(-v));
      break;
    case Task::regress: break;
  }
  return outputs;
}

PlanSummary Session::plan(int batch) {
  Network working = copy_network(network_);
  TrainerOptions options = options_;
  options.batch = batch;
  PlanSummary summary;
  summary.batch = batch;
  memory::MemoryStack stack = memory_stack_for(backend(), options);
  try {
    data::Loader::book(stack, SamplesOf(working, batch), loader_options(options));
  } catch (const memory::OutOfMemory& e) {  // not even the training loader's batches fit
    summary.table = e.what();
    return summary;
  }
  const BatchPlanner planner(working, backend(), planning_options(options, working, backend(), stack));
  summary.micro_batch = planner.choose();
  summary.breakdown = planner.breakdown(std::max(summary.micro_batch, 1));
  if (summary.micro_batch > 0)
    summary.micro_batches_per_step = split_into_micro_batches(batch, summary.micro_batch,
                                                              planner.training_batch_need().samples).count;
  summary.table = format_memory_table(summary.breakdown);
  return summary;
}

namespace {

// What save and export_onnx may write over: the checks a run's outputs get (check_run_files).
void check_output(const std::filesystem::path& file, OutputKind kind, const char* call, bool overwrite) {
  RunFiles files;
  files.outputs.push_back({call, file, kind});
  files.overwrite = overwrite;
  files.overwrite_option = "overwrite=True";
  files.resume_option = "fit(resume=...)";
  check_run_files(files);
}

}  // namespace

struct Session::Described {
  std::unique_ptr<Inference> held;
  ModelDescription model;
};

Session::Described Session::described() {
  ensure_parameters();
  Described d{inference(1, nullptr, nullptr), description_};
  d.model.network = network_text(d.held->network);
  return d;
}

void Session::save(const std::filesystem::path& file, bool overwrite) {
  check_output(file, OutputKind::checkpoint, "save", overwrite);
  const Described d = described();
  save_checkpoint(file, d.held->network, d.held->predictor->parameters(), d.model);
}

void Session::export_onnx(const std::filesystem::path& file, bool overwrite) {
  check_output(file, OutputKind::onnx, "export_onnx", overwrite);
  Described d = described();
  if (d.model.class_names.empty())
    for (int c = 0; c < network_.num_classes(); ++c) d.model.class_names.push_back(std::to_string(c));
  cnn::export_onnx(file, d.held->network, d.held->predictor->parameters(), d.model);
}

std::size_t Session::parameter_count() const {
  std::size_t total = 0;
  for (int id = 1; id < network_.size(); ++id)
    for (const ParamSpec& p : network_.node(id).layer->parameters())
      if (p.trainable) total += p.shape.elements();
  return total;
}

}  // namespace cnn::python
