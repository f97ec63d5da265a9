#include <cnnengine/engine/core/layer.hpp>

#include <climits>
#include <cstdint>
#include <stdexcept>

namespace cnn {

void Layer::forward_then_relu(const LayerContext&) {
  throw std::logic_error(type_name() + ": forward_then_relu on a layer that does not run a ReLU after it");
}

void Layer::backward_through_relu(const LayerContext&) {
  throw std::logic_error(type_name() + ": backward_through_relu on a layer that does not run a ReLU after it");
}

void Layer::forward_then_add_relu(const LayerContext&) {
  throw std::logic_error(type_name() + ": forward_then_add_relu on a layer that does not run an add and ReLU after it");
}

void Layer::backward_through_add_relu(const LayerContext&) {
  throw std::logic_error(type_name() +
                         ": backward_through_add_relu on a layer that does not run an add and ReLU after it");
}

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

}  // namespace cnn
