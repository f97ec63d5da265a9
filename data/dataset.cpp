#include <cnnengine/data/dataset.hpp>

#include <stdexcept>
#include <string>
#include <vector>

namespace cnn::data {

int Dataset::label(std::size_t index) const {
  std::vector<float> scratch(shape().elements());
  return load(index, scratch.data());
}

void Dataset::load_target(std::size_t /*index*/, void* /*out*/) const {
  throw std::logic_error("load_target on a data set of " + to_string(task()) + ", which has no targets but labels");
}

std::size_t Dataset::target_bytes() const {
  if (task() == Task::classify) return 0;
  const SampleShape s = shape();
  return cnn::target_bytes(task(), num_classes(), s.height, s.width);
}

std::string to_string(const SampleShape& shape) {
  return std::to_string(shape.channels) + "x" + std::to_string(shape.height) + "x" +
         std::to_string(shape.width);
}

}  // namespace cnn::data
