#include "cnnengine/models/detail/checkpoint_meta.hpp"

#include <nlohmann/json.hpp>

namespace cnn {
namespace {

using nlohmann::json;

json preprocessing_json(const data::Preprocessing& p) {
  return {{"channels", p.shape.channels}, {"height", p.shape.height}, {"width", p.shape.width},
          {"mean", p.normalization.mean}, {"stddev", p.normalization.stddev}};
}

data::Preprocessing preprocessing_of(const json& j) {
  data::Preprocessing p;
  p.shape.channels = j.at("channels").get<int>();
  p.shape.height = j.at("height").get<int>();
  p.shape.width = j.at("width").get<int>();
  p.normalization.mean = j.at("mean").get<std::vector<float>>();
  p.normalization.stddev = j.at("stddev").get<std::vector<float>>();
  return p;
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
          {"seconds", e.seconds},
          {"images_per_second", e.images_per_second}};
}

EpochRecord epoch_of(const json& j) {
  EpochRecord e;
  e.epoch = j.at("epoch").get<int>();
  e.train_loss = j.at("train_loss").get<double>();
  e.train_accuracy = j.at("train_accuracy").get<double>();
  e.test_loss = optional_of(j.at("test_loss"));
  e.test_accuracy = optional_of(j.at("test_accuracy"));
  e.seconds = j.at("seconds").get<double>();
  e.images_per_second = j.at("images_per_second").get<double>();
  return e;
}

json training_json(const TrainingCheckpoint& t) {
  const RunProgress& p = t.progress;
  json epochs = json::array();
  for (const EpochRecord& e : p.epochs) epochs.push_back(epoch_json(e));
  return {{"trainer", {{"steps", t.trainer.steps}, {"micro_batch", t.trainer.micro_batch},
                       {"good_steps", t.trainer.good_steps}}},
          {"progress", {{"epoch", p.epoch}, {"batches_done", p.batches_done}, {"loss_sum", p.loss_sum},
                        {"correct", p.correct}, {"seen", p.seen}, {"seconds", p.seconds}, {"epochs", epochs}}},
          {"settings", t.settings}};
}

TrainingCheckpoint training_of(const json& j) {
  TrainingCheckpoint t;
  const json& trainer = j.at("trainer");
  t.trainer.steps = trainer.at("steps").get<long>();
  t.trainer.micro_batch = trainer.at("micro_batch").get<int>();
  t.trainer.good_steps = trainer.at("good_steps").get<long>();
  const json& progress = j.at("progress");
  RunProgress& p = t.progress;
  p.epoch = progress.at("epoch").get<int>();
  p.batches_done = progress.at("batches_done").get<std::size_t>();
  p.loss_sum = progress.at("loss_sum").get<double>();
  p.correct = progress.at("correct").get<double>();
  p.seen = progress.at("seen").get<std::size_t>();
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
    const auto input = model.at("input").get<std::vector<int>>();
    if (input.size() != 3) throw CheckpointError(source + ": corrupt (the input shape is not C x H x W)");
    meta.model.input = Shape{input[0], input[1], input[2]};
    meta.model.class_names = model.at("class_names").get<std::vector<std::string>>();
    meta.model.preprocessing = preprocessing_of(model.at("preprocessing"));
    // An image is brought to the network's input: another size would be read past its end.
    const data::SampleShape& image = meta.model.preprocessing.shape;
    if (!(image == data::SampleShape{input[0], input[1], input[2]}))
      throw CheckpointError(source + ": corrupt (images are brought to " + data::to_string(image) +
                            ", the network takes " + meta.model.input.str() + ")");
    meta.fingerprint = model.at("fingerprint").get<std::uint32_t>();
    const json& blocks = j.at("blocks");
    meta.parameter_floats = blocks.at("parameters").get<std::uint64_t>();
    meta.optimizer_floats = blocks.at("optimizer_state").get<std::uint64_t>();
    meta.history_steps = blocks.at("step_history").get<std::uint64_t>();
    if (j.contains("training")) meta.training = training_of(j.at("training"));
    return meta;
  } catch (const json::exception& e) {
    throw CheckpointError(source + ": corrupt (its description cannot be read: " + e.what() + ")");
  }
}

}  // namespace cnn
