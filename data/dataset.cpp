#include "data/dataset.hpp"

#include <vector>

namespace cnn::data {

int Dataset::label(std::size_t index) const {
  std::vector<float> scratch(shape().elements());
  return load(index, scratch.data());
}

std::string to_string(const SampleShape& shape) {
  return std::to_string(shape.channels) + "x" + std::to_string(shape.height) + "x" +
         std::to_string(shape.width);
}

}  // namespace cnn::data
