#include "models/detail/checkpoint_meta.hpp"

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace cnn {
namespace {

using nlohmann::json;

// A field that reads as JSON but not as what it holds: read_meta names the file.
struct BadField : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A whole number that fits T, at least `least`: nlohmann's get<int>() would wrap 2^32 + 1 to 1,
// and a negative count to a huge one.
template <typename T>
T whole(const json& j, const char* key, std::uint64_t least = 0) {
  const json& value = j.at(key);
  const bool non_negative = value.is_number_unsigned() || (value.is_number_integer() && value.get<std::int64_t>() >= 0);
  const std::uint64_t number = non_negative ? value.get<std::uint64_t>() : 0;
  const auto most = static_cast<std::uint64_t>(std::numeric_limits<T>::max());
  if (!non_negative || number < least || number > most)
    throw BadField(std::string("its ") + key + " is " + value.dump() + ", not a whole number from " +
                   std::to_string(least) + " to " + std::to_string(most));
  return static_cast<T>(number);
}

// resize_shorter_side is written where it is not 0 (stretching, all files before it knew).
json preprocessing_json(const data::Preprocessing& p) {
  json j = {{"channels", p.shape.channels}, {"height", p.shape.height}, {"width", p.shape.width},
            {"mean", p.normalization.mean},   {"stddev", p.normalization.stddev}};
  if (p.resize_shorter_side != 0) j["resize_shorter_side"] = p.resize_shorter_side;
  return j;
}

data::Preprocessing preprocessing_of(const json& j) {
  data::Preprocessing p;
  p.shape.channels = whole<int>(j, "channels", 1);
  p.shape.height = whole<int>(j, "height", 1);
  p.shape.width = whole<int>(j, "width", 1);
  p.normalization.mean = j.at("mean").get<std::vector<float>>();
  p.normalization.stddev = j.at("stddev").get<std::vector<float>>();
  if (j.contains("resize_shorter_side")) p.resize_shorter_side = whole<int>(j, "resize_shorter_side");
  return p;
}

json loss_json(const LossOptions& o) {
  return {{"task", to_string(o.task)},
          {"label_smoothing", o.label_smoothing},
          {"class_weights", o.class_weights},
          {"positive_weights", o.positive_weights},
          {"regression", to_string(o.regression)},
          {"huber_delta", o.huber_delta},
          {"threshold", o.threshold}};
}

// Absent from the files of versions before the tasks: a classification. Whether the options suit
// the network is checked when it is built (checkpoint_network).
LossOptions loss_of(const json& model) {
  LossOptions o;
  if (!model.contains("loss")) return o;
  const json& j = model.at("loss");
  try {
    o.task = parse_task(j.at("task").get<std::string>());
    o.regression = parse_regression_loss(j.at("regression").get<std::string>());
  } catch (const ConfigError& e) {
    throw BadField(std::string("its loss: ") + e.what());
  }
  o.label_smoothing = j.at("label_smoothing").get<float>();
  o.class_weights = j.at("class_weights").get<std::vector<float>>();
  o.positive_weights = j.at("positive_weights").get<std::vector<float>>();
  o.huber_delta = j.at("huber_delta").get<float>();
  o.threshold = j.at("threshold").get<float>();
  return o;
}

json optional_json(const std::optional<double>& value) { return value ? json(*value) : json(); }
std::optional<double> optional_of(const json& j) {
  return j.is_null() ? std::nullopt : std::optional<double>(j.get<double>());
}

json epoch_json(const EpochRecord& e) {
  return {{"epoch", e.epoch},
          {"train_loss", e.train_loss},
          {"train_accuracy", e.train_accuracy},
          {"test_loss", optional_json(e.test_loss)},
          {"test_accuracy", optional_json(e.test_accuracy)},
          {"validation_loss", optional_json(e.validation_loss)},
          {"validation_accuracy", optional_json(e.validation_accuracy)},
          {"validation_scores", e.validation_scores},
          {"test_scores", e.test_scores},
          {"learning_rate", e.learning_rate},
          {"seconds", e.seconds},
          {"images_per_second", e.images_per_second},
          {"data_wait_share", optional_json(e.data_wait_share)},
          {"loader_images_per_second", optional_json(e.loader_images_per_second)}};
}

EpochRecord epoch_of(const json& j) {
  EpochRecord e;
  e.epoch = whole<int>(j, "epoch", 1);
  e.train_loss = j.at("train_loss").get<double>();
  e.train_accuracy = j.at("train_accuracy").get<double>();
  e.test_loss = optional_of(j.at("test_loss"));
  e.test_accuracy = optional_of(j.at("test_accuracy"));
  // Absent from the files of versions that had no validation set.
  e.validation_loss = optional_of(j.value("validation_loss", json()));
  e.validation_accuracy = optional_of(j.value("validation_accuracy", json()));
  // Absent from the files of versions before the tasks.
  e.validation_scores = j.value("validation_scores", json::object()).get<std::map<std::string, double>>();
  e.test_scores = j.value("test_scores", json::object()).get<std::map<std::string, double>>();
  e.learning_rate = j.value("learning_rate", 0.0);
  e.seconds = j.at("seconds").get<double>();
  e.images_per_second = j.at("images_per_second").get<double>();
  // Absent from the files of versions before the loader was measured.
  e.data_wait_share = optional_of(j.value("data_wait_share", json()));
  e.loader_images_per_second = optional_of(j.value("loader_images_per_second", json()));
  return e;
}

json training_json(const TrainingCheckpoint& t) {
  const RunProgress& p = t.progress;
  json epochs = json::array();
  for (const EpochRecord& e : p.epochs) epochs.push_back(epoch_json(e));
  return {{"trainer", {{"steps", t.trainer.steps}, {"micro_batch", t.trainer.micro_batch},
                       {"good_steps", t.trainer.good_steps},
                       {"learning_rate_scale", t.trainer.learning_rate_scale},
                       {"loss_scale", t.trainer.loss_scale}, {"loss_scale_steps", t.trainer.loss_scale_steps},
                       {"skipped_steps", t.trainer.skipped_steps}}},
          {"progress", {{"epoch", p.epoch}, {"batches_done", p.batches_done}, {"loss_sum", p.loss_sum},
                        {"correct", p.correct}, {"seen", p.seen}, {"seconds", p.seconds}, {"epochs", epochs}}},
          {"settings", t.settings}};
}

TrainingCheckpoint training_of(const json& j) {
  TrainingCheckpoint t;
  const json& trainer = j.at("trainer");
  t.trainer.steps = whole<long>(trainer, "steps");
  t.trainer.micro_batch = whole<int>(trainer, "micro_batch", 1);
  t.trainer.good_steps = whole<long>(trainer, "good_steps");
  t.trainer.learning_rate_scale = trainer.value("learning_rate_scale", 1.0f);  // 1 before it was kept
  // fp16's loss scaling; none before it was kept (a run that scales starts at its initial scale).
  t.trainer.loss_scale = trainer.value("loss_scale", 0.0f);
  t.trainer.loss_scale_steps = trainer.contains("loss_scale_steps") ? whole<long>(trainer, "loss_scale_steps") : 0;
  t.trainer.skipped_steps = trainer.contains("skipped_steps") ? whole<long>(trainer, "skipped_steps") : 0;
  const json& progress = j.at("progress");
  RunProgress& p = t.progress;
  p.epoch = whole<int>(progress, "epoch", 1);
  p.batches_done = whole<std::size_t>(progress, "batches_done");
  p.loss_sum = progress.at("loss_sum").get<double>();
  p.correct = progress.at("correct").get<double>();
  p.seen = whole<std::size_t>(progress, "seen");
  p.seconds = progress.at("seconds").get<double>();
  for (const json& e : progress.at("epochs")) p.epochs.push_back(epoch_of(e));
  t.settings = j.at("settings").get<std::string>();
  return t;
}

}  // namespace

std::string write_meta(const CheckpointMeta& meta) {
  const ModelDescription& m = meta.model;
  json j = {{"format", "cnnengine checkpoint"},
            {"version", kCheckpointVersion},
            {"model",
             {{"network", m.network},
              {"input", {m.input[0], m.input[1], m.input[2]}},
              {"class_names", m.class_names},
              {"preprocessing", preprocessing_json(m.preprocessing)},
              {"loss", loss_json(m.loss)},
              {"fingerprint", meta.fingerprint}}},
            {"blocks",
             {{"parameters", meta.parameter_floats},
              {"optimizer_state", meta.optimizer_floats},
              {"step_history", meta.history_steps}}}};
  if (meta.training) j["training"] = training_json(*meta.training);
  return j.dump();
}

CheckpointMeta read_meta(const std::string& text, const std::string& source) {
  try {
    const json j = json::parse(text);
    if (j.at("format").get<std::string>() != "cnnengine checkpoint")
      throw CheckpointError(source + ": not a cnnengine checkpoint");
    CheckpointMeta meta;
    const json& model = j.at("model");
    meta.model.network = model.at("network").get<std::string>();
    const json& input_json = model.at("input");
    if (!input_json.is_array() || input_json.size() != 3)
      throw CheckpointError(source + ": corrupt (the input shape is not C x H x W)");
    const json dims = {
        {"input channels", input_json[0]}, {"input height", input_json[1]}, {"input width", input_json[2]}};
    const std::vector<int> input = {whole<int>(dims, "input channels", 1), whole<int>(dims, "input height", 1),
                                    whole<int>(dims, "input width", 1)};
    meta.model.input = Shape{input[0], input[1], input[2]};
    meta.model.class_names = model.at("class_names").get<std::vector<std::string>>();
    meta.model.preprocessing = preprocessing_of(model.at("preprocessing"));
    meta.model.loss = loss_of(model);
    // An image is brought to the network's input: another size would be read past its end.
    const data::SampleShape& image = meta.model.preprocessing.shape;
    if (!(image == data::SampleShape{input[0], input[1], input[2]}))
      throw CheckpointError(source + ": corrupt (images are brought to " + data::to_string(image) +
                            ", the network takes " + meta.model.input.str() + ")");
    try {
      data::check_framing(image, meta.model.preprocessing.resize_shorter_side);
    } catch (const ConfigError& e) {
      throw CheckpointError(source + ": corrupt (its preprocessing: " + e.what() + ")");
    }
    meta.fingerprint = whole<std::uint32_t>(model, "fingerprint");
    const json& blocks = j.at("blocks");
    meta.parameter_floats = whole<std::uint64_t>(blocks, "parameters");
    meta.optimizer_floats = whole<std::uint64_t>(blocks, "optimizer_state");
    meta.history_steps = whole<std::uint64_t>(blocks, "step_history");
    if (j.contains("training")) meta.training = training_of(j.at("training"));
    return meta;
  } catch (const json::exception& e) {
    throw CheckpointError(source + ": corrupt (its description cannot be read: " + e.what() + ")");
  } catch (const BadField& e) {
    throw CheckpointError(source + ": corrupt (" + e.what() + ")");
  }
}

}  // namespace cnn
