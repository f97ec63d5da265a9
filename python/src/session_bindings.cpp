// The model from Python (cnnengine.Model wraps _Session): its settings read from dicts, fit()
// with the package's event dispatcher as its callbacks, the GIL released while the engine works.
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <csignal>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <cnnengine/base/error.hpp>
#include <cnnengine/engine/core/task_scores.hpp>
#include <cnnengine/engine/train/optimizer.hpp>
#include <cnnengine/memory/memory_resource.hpp>
#include "bindings.hpp"
#include "data_handle.hpp"
#include "network_copy.hpp"
#include "python_output.hpp"
#include "session.hpp"
#include "settings.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace cnn::python {
namespace {

// What a Model's settings make: the device asked for, the trainer's options, the loss and what
// checkpoints record. Every key is the Python keyword's name.
struct ModelSettings {
  DeviceRequest device;
  TrainerOptions trainer;
  LossOptions loss;
  std::optional<std::vector<std::string>> class_names;
  std::optional<data::Normalization> normalization;
  bool task_given = false, loss_given = false;  // for a loaded model, which has its own
};

ModelSettings model_settings(nb::dict values) {
  Settings s(std::move(values), "Model");
  ModelSettings m;
  if (auto word = s.get<std::string>("device")) m.device.device = parse_device(*word);
  if (auto word = s.get<std::string>("precision")) m.device.precision = parse_precision(*word);
  s.read("threads", m.device.threads);
  s.read("deterministic", m.device.deterministic);
  if (m.device.threads < 0)
    throw OptionError("threads", "threads=" + std::to_string(m.device.threads) + ": 0 (all) or more");
  TrainerOptions& t = m.trainer;
  const nb::handle budget = s.get_handle("memory_budget");  // bytes, or a text as "2GiB"
  if (budget.is_valid() && nb::isinstance<nb::str>(budget)) {
    try {
      t.memory_budget = memory::parse_bytes(nb::cast<std::string>(budget));
    } catch (const ConfigError& e) {
      throw OptionError("memory_budget", std::string("memory_budget: ") + e.what());
    }
  } else {
    s.read("memory_budget", t.memory_budget);
  }
  s.read("micro_batch", t.micro_batch);
  s.read("accumulate", t.accumulate);
  if (auto word = s.get<std::string>("recompute")) t.recompute = parse_recompute_policy(*word);
  s.read("seed", t.seed);
  s.read("workspace_limit", t.workspace_limit);
  OptimizerConfig& o = t.optimizer;
  if (auto word = s.get<std::string>("optimizer")) o.kind = parse_optimizer_kind(*word);
  s.read("lr", o.learning_rate);
  if (auto decay = s.get<float>("weight_decay")) o.weight_decay = *decay;
  s.read("momentum", o.momentum);
  s.read("nesterov", o.nesterov);
  s.read("beta_1", o.beta1);
  s.read("beta_2", o.beta2);
  s.read("epsilon", o.epsilon);
  ScheduleConfig& schedule = t.schedule;
  schedule.kind = ScheduleKind::constant;  // Keras's: a rate that changes is asked for
  if (auto word = s.get<std::string>("schedule")) schedule.kind = parse_schedule_kind(*word);
  s.read("warmup_steps", schedule.warmup_steps);
  s.read("step_every", schedule.step_every);
  s.read("gamma", schedule.gamma);
  s.read("final_fraction", schedule.final_fraction);
  s.read("plateau_factor", schedule.plateau_factor);
  s.read("plateau_patience", schedule.plateau_patience);
  m.task_given = s.given("task");
  for (const char* key : {"label_smoothing", "class_weights", "pos_weights", "loss", "huber_delta", "threshold"})
    m.loss_given = m.loss_given || s.given(key);
  if (auto word = s.get<std::string>("task")) m.loss.task = parse_task(*word);
  s.read("label_smoothing", m.loss.label_smoothing);
  s.read("class_weights", m.loss.class_weights);
  s.read("pos_weights", m.loss.positive_weights);
  if (auto word = s.get<std::string>("loss")) m.loss.regression = parse_regression_loss(*word);
  s.read("huber_delta", m.loss.huber_delta);
  s.read("threshold", m.loss.threshold);
  m.class_names = s.get<std::vector<std::string>>("class_names");
  auto mean = s.get<std::vector<float>>("normalize_mean");
  auto stddev = s.get<std::vector<float>>("normalize_std");
  if (mean || stddev)
    m.normalization = data::Normalization{mean.value_or(std::vector<float>{}), stddev.value_or(std::vector<float>{})};
  s.refuse_unknown();
  make_optimizer(o);  // its ConfigError names the setting out of range, before anything is planned
  validate(schedule);
  return m;
}

std::unique_ptr<Session> make_session(const Network& network, nb::dict values) {
  ModelSettings m = model_settings(std::move(values));
  Network copy = copy_network(network);
  copy.set_loss(m.loss);
  ModelDescription description;
  const PythonOutput output;
  auto session = std::make_unique<Session>(std::move(copy), m.device, m.trainer, description);
  if (m.class_names) session->set_class_names(*m.class_names);
  if (m.normalization) session->set_normalization(*m.normalization);
  return session;
}

std::unique_ptr<Session> load_session(const std::string& file, nb::dict values) {
  ModelSettings m = model_settings(std::move(values));
  std::unique_ptr<Session> session;
  {
    const PythonOutput output;
    nb::gil_scoped_release unlocked;
    session = Session::load(file, m.device, m.trainer);
  }
  const Task task = session->network().task();
  if (m.task_given && m.loss.task != task)
    throw OptionError("task", "task: " + file + " holds a network trained to " + to_string(task) + ", not to " +
                                  to_string(m.loss.task));
  if (m.loss_given) {
    m.loss.task = task;
    session->set_loss(m.loss);
  }
  if (m.class_names) session->set_class_names(*m.class_names);
  if (m.normalization) session->set_normalization(*m.normalization);
  return session;
}

// ---- fit

FitOptions fit_options(nb::dict values) {
  Settings s(std::move(values), "fit");
  FitOptions o;
  s.require("batch_size", o.batch);
  s.require("epochs", o.epochs);
  s.require("validation_split", o.validation_split);
  int verbose = 1;
  s.require("verbose", verbose);
  if (verbose < 0 || verbose > 2)
    throw OptionError("verbose", "verbose=" + std::to_string(verbose) +
                                     ": 0 (silent), 1 (a progress bar and a line an epoch) or 2 (the lines)");
  o.progress = verbose > 0;
  o.progress_bar = verbose == 1;
  s.read("shuffle", o.loading.shuffle);
  s.read("flip", o.loading.augment_flip);
  s.read("crop_padding", o.loading.augment_crop_padding);
  s.read("random_resized_crop", o.loading.photo.crop.enabled);
  if (s.given("color_jitter")) {
    float f = 0;
    s.read("color_jitter", f);
    o.loading.photo.jitter = {f, f, f};
  }
  s.read("random_erasing", o.loading.photo.erasing.probability);
  s.read("loader_threads", o.loading.threads);
  s.read("prefetch", o.loading.prefetch);
  if (auto path = s.get<std::string>("checkpoint")) o.save = *path;
  s.read("save_every", o.save_every);
  if (auto path = s.get<std::string>("resume")) o.resume = *path;
  if (auto path = s.get<std::string>("load")) o.load = *path;
  s.read("new_head", o.new_head);
  if (auto path = s.get<std::string>("metrics")) o.metrics = *path;
  if (auto path = s.get<std::string>("csv")) o.csv = *path;
  if (auto path = s.get<std::string>("tensorboard")) o.tensorboard = *path;
  s.read("overwrite", o.overwrite);
  if (auto word = s.get<std::string>("monitor")) o.monitor = parse_monitored_metric(*word);
  s.read("patience", o.early_stop);
  s.read("save_best_only", o.keep_best);
  s.read("restore_best_weights", o.restore_best);
  s.read("unfreeze_at", o.unfreeze_at);
  s.read("warmup_epochs", o.warmup_epochs);
  s.read("step_every_epochs", o.step_every_epochs);
  s.read("limit", o.limit);
  s.refuse_unknown();
  if (o.restore_best) o.keep_best = true;  // Keras's restore_best_weights needs the best kept
  return o;
}

nb::dict epoch_logs(const EpochRecord& e) {
  nb::dict logs;
  logs["loss"] = e.train_loss;
  logs["accuracy"] = e.train_accuracy;
  if (e.validation_loss) logs["val_loss"] = *e.validation_loss;
  if (e.validation_accuracy) logs["val_accuracy"] = *e.validation_accuracy;
  for (const auto& [name, value] : e.validation_scores) logs[("val_" + name).c_str()] = value;
  logs["learning_rate"] = e.learning_rate;
  logs["seconds"] = e.seconds;
  logs["images_per_second"] = e.images_per_second;
  return logs;
}

// Calls the package's dispatcher with the GIL, and does what it answers: {"stop": reason} ends
// the run at the next step boundary, {"learning_rate": r} sets the next step's rate.
class Events {
 public:
  explicit Events(nb::object dispatch) : dispatch_(std::move(dispatch)) {}

  template <class Make>
  void send(const char* event, FitControl& control, Make make_payload) const {
    nb::gil_scoped_acquire locked;
    nb::object answer = dispatch_(event, make_payload(), control.trainer().learning_rate());
    if (answer.is_none()) return;
    nb::dict steer = nb::cast<nb::dict>(answer);
    if (steer.contains("learning_rate")) control.set_learning_rate(nb::cast<float>(steer["learning_rate"]));
    if (steer.contains("stop")) control.stop(nb::cast<std::string>(steer["stop"]));
  }

  FitCallbacks callbacks() const {
    FitCallbacks c;
    c.on_run_begin = [this](FitControl& control) { send("train_begin", control, [] { return nb::dict(); }); };
    c.on_epoch_begin = [this](int epoch, FitControl& control) {
      send("epoch_begin", control, [epoch] { return nb::cast(epoch - 1); });
    };
    c.on_step = [this](const StepReport& r, FitControl& control) {
      send("batch_end", control, [&r] {
        nb::dict logs;
        logs["loss"] = r.loss;
        logs["accuracy"] = r.accuracy;
        logs["learning_rate"] = r.learning_rate;
        logs["micro_batch"] = r.micro_batch;
        logs["micro_batches"] = r.micro_batches;
        return nb::make_tuple(r.step, logs);
      });
    };
    c.on_epoch_end = [this](const EpochRecord& e, FitControl& control) {
      send("epoch_end", control, [&e] { return nb::make_tuple(e.epoch - 1, epoch_logs(e)); });
    };
    c.on_run_end = [this](const FitResult&, FitControl& control) {
      send("train_end", control, [] { return nb::dict(); });
    };
    return c;
  }

 private:
  nb::object dispatch_;
};

nb::dict fit_result(const FitResult& r) {
  nb::dict out;
  nb::list history;
  for (const EpochRecord& e : r.history) history.append(epoch_logs(e));
  out["history"] = history;
  out["epochs_trained"] = r.epochs_trained;
  out["best_epoch"] = r.best_epoch;
  out["best_value"] = r.best_value ? nb::cast(*r.best_value) : nb::none();
  out["best_checkpoint"] = r.best_checkpoint.string();
  out["stopped_because"] = r.stopped_because;
  out["signal"] = r.signal;
  out["seconds"] = r.seconds;
  out["steps"] = r.steps;
  return out;
}

nb::dict fit(Session& session, const DataHandle& train, std::optional<DataHandle> validation, nb::dict options,
             nb::object dispatch) {
  FitOptions o = fit_options(std::move(options));
  std::unique_ptr<Events> events;
  if (!dispatch.is_none()) {
    events = std::make_unique<Events>(dispatch);
    o.callbacks = events->callbacks();
  }
  FitResult result;
  {
    const PythonOutput output;
    nb::gil_scoped_release unlocked;
    const FitData data(*train.data, validation ? validation->data.get() : nullptr);
    result = session.fit(data, std::move(o));
  }
  return fit_result(result);
}

// ---- evaluate, predict, plan

nb::dict evaluation(const ClassEvaluation& e) {
  nb::dict out;
  out["loss"] = e.loss;
  out["accuracy"] = e.accuracy;
  out["samples"] = e.samples;
  for (const auto& [name, value] : headline_scores(e.scores)) out[name.c_str()] = value;
  return out;
}

nb::ndarray<nb::numpy, float> predictions(Session& session, const DataHandle& images, int batch, bool probabilities) {
  if (batch < 1) throw OptionError("batch_size", "batch_size=" + std::to_string(batch) + ": at least 1");
  auto* values = new std::vector<float>();
  nb::capsule owner(values, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
  {
    nb::gil_scoped_release unlocked;
    *values = session.predict(*images.data, batch, probabilities);
  }
  std::vector<std::size_t> shape{images.data->size()};
  const Shape out = session.network().output_shape();  // the model's own, read with the GIL held
  for (int i = 0; i < out.rank; ++i) shape.push_back(static_cast<std::size_t>(out[i]));
  return nb::ndarray<nb::numpy, float>(values->data(), shape.size(), shape.data(), owner);
}

nb::dict plan(Session& session, int batch) {
  if (batch < 1) throw OptionError("batch_size", "batch_size=" + std::to_string(batch) + ": at least 1");
  PlanSummary p;
  {
    nb::gil_scoped_release unlocked;
    p = session.plan(batch);
  }
  const MemoryBreakdown& m = p.breakdown;
  nb::dict bytes;
  for (std::size_t c = 0; c < memory::kCategoryCount; ++c) {
    const auto category = static_cast<memory::Category>(c);
    const std::size_t held = m.persistent[category];
    if (held > 0) bytes[std::string(memory::category_name(category)).c_str()] = held;
  }
  bytes["arena"] = m.arena_bytes;
  bytes["library"] = m.library;
  bytes["input_staging"] = m.input_staging;
  bytes["loader_staging"] = m.loader_staging;
  bytes["total"] = m.total();
  nb::dict out;
  out["batch_size"] = p.batch;
  out["micro_batch"] = p.micro_batch;
  out["accumulation_steps"] = p.micro_batches_per_step;
  out["fits"] = p.micro_batch > 0;
  out["budget"] = m.budget == 0 ? nb::none() : nb::cast(m.budget);
  out["bytes"] = bytes;
  out["arena_lower_bound"] = m.lower_bound;
  out["recomputed_layers"] = m.recomputed_layers;
  out["table"] = p.table;
  return out;
}

}  // namespace

void bind_session(nb::module_& m) {
  nb::class_<Session>(m, "_Session", "A network on a device with its weights; cnnengine.Model wraps it.")
      .def_static("create", &make_session, "network"_a, "settings"_a)
      .def_static("load", &load_session, "file"_a, "settings"_a)
      .def("fit", &fit, "train"_a, "validation"_a.none(), "options"_a, "dispatch"_a.none())
      .def(
          "evaluate",
          [](Session& s, const DataHandle& data, int batch) {
            if (batch < 1) throw OptionError("batch_size", "batch_size=" + std::to_string(batch) + ": at least 1");
            ClassEvaluation e;
            {
              const PythonOutput output;
              nb::gil_scoped_release unlocked;
              e = s.evaluate(*data.data, batch);
            }
            return evaluation(e);
          },
          "data"_a, "batch"_a)
      .def("predict", &predictions, "images"_a, "batch"_a, "probabilities"_a)
      .def("plan", &plan, "batch"_a)
      .def(
          "save",
          [](Session& s, const std::string& file, bool overwrite) {
            nb::gil_scoped_release unlocked;
            s.save(file, overwrite);
          },
          "file"_a, "overwrite"_a)
      .def(
          "export_onnx",
          [](Session& s, const std::string& file, bool overwrite) {
            const PythonOutput output;
            nb::gil_scoped_release unlocked;
            s.export_onnx(file, overwrite);
          },
          "file"_a, "overwrite"_a)
      .def(
          "freeze",
          [](Session& s, int through, const std::string& mode) {
            if (mode != "eval" && mode != "train") throw OptionError("mode", "mode '" + mode + "': 'eval' or 'train'");
            s.freeze(through, mode == "eval" ? FrozenMode::eval : FrozenMode::train);
          },
          "through"_a, "mode"_a)
      .def_prop_ro("network", [](Session& s) { return copy_network(s.network()); }, "A copy of the model's network.")
      .def_prop_ro("input_shape", [](Session& s) {
        const Shape in = s.network().input_shape();
        return std::vector<int>{in[0], in[1], in[2]};
      })
      .def_prop_ro("outputs", [](Session& s) { return s.network().output_shape()[0]; },
                   "Classes or targets (a segmentation's: its output's channels).")
      .def_prop_ro("head", [](Session& s) { return s.network().head(); })
      .def_prop_ro("summary_text", [](Session& s) { return s.network().summary(); })
      .def_prop_ro("device", &Session::device_name)
      .def_prop_ro("device_reason", &Session::device_reason)
      .def_prop_ro("task", [](Session& s) { return to_string(s.network().task()); })
      .def_prop_ro("class_names", [](Session& s) { return s.description().class_names; })
      .def_prop_ro("steps", &Session::steps)
      .def_prop_ro("parameter_count", &Session::parameter_count)
      .def_prop_ro("learning_rate", [](Session& s) { return s.options().optimizer.learning_rate; });
}

}  // namespace cnn::python
