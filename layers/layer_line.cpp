// LayerLine: the arguments and options of one line of network text, read as numbers.

#include <charconv>
#include <climits>
#include <cmath>
#include <exception>

#include <cnnengine/base/error.hpp>
#include <cnnengine/layers/registry.hpp>

namespace cnn {
namespace {

double parse_number(const std::string& text) {
  try {
    std::size_t used = 0;
    const double value = std::stod(text, &used);
    if (used == text.size()) return value;
  } catch (const std::exception&) {
  }
  throw ConfigError("'" + text + "' is not a number");
}

int parse_whole_number(const std::string& text) {
  const double value = parse_number(text);
  if (!std::isfinite(value) || value != std::floor(value) || value < INT_MIN || value > INT_MAX)
    throw ConfigError("'" + text + "' is not a whole number");
  return static_cast<int>(value);
}

}  // namespace

LayerLine::LayerLine(const LayerType& type, std::vector<std::string> arguments,
                     std::map<std::string, std::string> options, std::vector<int> inputs, int previous,
                     std::function<int(const std::string&)> output_named)
    : type_(type),
      arguments_(std::move(arguments)),
      options_(std::move(options)),
      inputs_(std::move(inputs)),
      previous_(previous),
      output_named_(std::move(output_named)) {}

void LayerLine::expect_arguments(std::size_t count) const {
  if (arguments_.size() != count)
    throw ConfigError("expected: " + type_.usage + (count == 0 ? " (no arguments)" : ""));
}

const std::string& LayerLine::argument(std::size_t index) const {
  if (index >= arguments_.size()) throw ConfigError("expected: " + type_.usage);
  return arguments_[index];
}

double LayerLine::number(std::size_t index) const { return parse_number(argument(index)); }

int LayerLine::whole_number(std::size_t index) const { return parse_whole_number(argument(index)); }

int LayerLine::whole_option(const std::string& key, int fallback) const {
  const auto it = options_.find(key);
  return it == options_.end() ? fallback : parse_whole_number(it->second);
}

std::string LayerLine::text_option(const std::string& key, const std::string& fallback) const {
  const auto it = options_.find(key);
  return it == options_.end() ? fallback : it->second;
}

float LayerLine::real_option(const std::string& key, float fallback) const {
  const auto it = options_.find(key);
  return it == options_.end() ? fallback : static_cast<float>(parse_number(it->second));
}

bool LayerLine::flag_option(const std::string& key, bool fallback) const {
  const int value = whole_option(key, fallback ? 1 : 0);
  if (value != 0 && value != 1) throw ConfigError(key + "= takes 0 or 1, got " + std::to_string(value));
  return value == 1;
}

void LayerLine::read_named_output(std::size_t index) {
  const std::string& name = argument(index);
  if (inputs_.empty()) inputs_.push_back(previous_);
  inputs_.push_back(output_named_(name));
}

std::string exact_text(float value) {
  char text[32];
  const auto end = std::to_chars(text, text + sizeof text, value).ptr;
  return std::string(text, end);
}

}  // namespace cnn
