#include "engine/core/layer.hpp"

#include <climits>
#include <cstdint>

namespace cnn {

int sliding_output(const std::string& layer, const char* window_name, int length, int window, int stride,
                   int padding) {
  const std::int64_t padded = std::int64_t{length} + 2 * std::int64_t{padding};
  if (padded < window)
    throw ShapeError(layer + ": an input of " + std::to_string(length) + " with padding " + std::to_string(padding) +
                     " is smaller than the " + window_name + " of " +
                     std::to_string(window));
  const std::int64_t output = (padded - window) / stride + 1;
  if (output > INT_MAX)
    throw ShapeError(layer + ": an input of " + std::to_string(length) + " with padding " + std::to_string(padding) +
                     " gives an output of " + std::to_string(output) + ", more than " + std::to_string(INT_MAX));
  return static_cast<int>(output);
}

std::string to_string(LayerKind kind) {
  switch (kind) {
    case LayerKind::conv2d: return "conv2d";
    case LayerKind::dense: return "dense";
    case LayerKind::relu: return "relu";
    case LayerKind::max_pool2d: return "maxpool2d";
    case LayerKind::average_pool2d: return "avgpool2d";
    case LayerKind::global_average_pool: return "global_avgpool";
    case LayerKind::batchnorm2d: return "batchnorm2d";
    case LayerKind::dropout: return "dropout";
    case LayerKind::add: return "add";
    case LayerKind::flatten: return "flatten";
    case LayerKind::custom: return "custom";
  }
  return "custom";
}

}  // namespace cnn
