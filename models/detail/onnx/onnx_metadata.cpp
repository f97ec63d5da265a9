#include "models/detail/onnx/onnx_metadata.hpp"

#include <nlohmann/json.hpp>

#include <charconv>
#include <string>
#include <vector>

#include <cnnengine/base/error.hpp>
#include <cnnengine/base/task.hpp>
#include <cnnengine/models/network_text.hpp>

namespace cnn {
namespace {

void set_property(onnx::ModelProto& model, const std::string& key, const std::string& value) {
  auto* p = model.add_metadata_props();
  p->set_key(key);
  p->set_value(value);
}

// One value per channel: none gives `none` for each, one is the same for each.
std::vector<float> per_channel(const std::vector<float>& values, int channels, float none, const char* what) {
  if (values.empty()) return std::vector<float>(static_cast<std::size_t>(channels), none);
  if (values.size() == 1) return std::vector<float>(static_cast<std::size_t>(channels), values[0]);
  if (values.size() != static_cast<std::size_t>(channels))
    throw ConfigError(std::string("ONNX export: the normalisation's ") + what + " has " + std::to_string(values.size()) +
                      " values for an input of " + std::to_string(channels) + " channels");
  return values;
}

// The shortest text that reads back as `value` ("0.3", not 0.30000001192092896).
std::string shortest_text(float value) {
  char text[32];
  const auto [end, error] = std::to_chars(text, text + sizeof text, value);
  return error == std::errc() ? std::string(text, end) : std::to_string(value);
}

std::vector<std::string> class_names(const ModelDescription& description, int classes) {
  if (description.class_names.empty()) {
    std::vector<std::string> numbers;
    for (int i = 0; i < classes; ++i) numbers.push_back(std::to_string(i));
    return numbers;
  }
  if (description.class_names.size() != static_cast<std::size_t>(classes)) {
    const Task task = description.loss.task;
    throw ConfigError("ONNX export: " + std::to_string(description.class_names.size()) + " class names for a " +
                      (task == Task::classify ? "" : to_string(task) + " ") + "network of " + std::to_string(classes) +
                      (task == Task::regress ? " targets" : " classes") +
                      (task == Task::segment ? " (its output's channels)" : ""));
  }
  return description.class_names;
}

}  // namespace

void write_onnx_metadata(onnx::ModelProto& model, const Network& network, const ModelDescription& description,
                         int classes, bool fp16) {
  const Shape& input = network.input_shape();
  const int channels = input[0];
  const auto mean = per_channel(description.preprocessing.normalization.mean, channels, 0.f, "mean");
  const auto stddev = per_channel(description.preprocessing.normalization.stddev, channels, 1.f, "std");
  for (float s : stddev)
    if (!(s > 0)) throw ConfigError("ONNX export: the normalisation's std " + std::to_string(s) + " is not positive");
  set_property(model, "task", to_string(description.loss.task));
  set_property(model, "class_names", nlohmann::json(class_names(description, classes)).dump());
  set_property(model, "normalization_mean", nlohmann::json(mean).dump());
  set_property(model, "normalization_std", nlohmann::json(stddev).dump());
  set_property(model, "pixel_scale", "1/255");
  if (description.preprocessing.resize_shorter_side != 0)
    set_property(model, "resize_shorter_side", std::to_string(description.preprocessing.resize_shorter_side));
  std::string shape;
  for (int i = 0; i < input.rank; ++i) shape += (i ? "x" : "") + std::to_string(input[i]);
  set_property(model, "input_shape", shape);
  set_property(model, "cnnengine_network", description.network.empty() ? network_text(network) : description.network);
  if (description.loss.task == Task::multilabel)
    set_property(model, "threshold", shortest_text(description.loss.threshold));
  set_property(model, "precision", fp16 ? "fp16" : "fp32");
}

}  // namespace cnn
