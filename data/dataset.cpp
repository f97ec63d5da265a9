#include <cnnengine/data/dataset.hpp>

#include <stdexcept>
#include <string>
#include <vector>

#include "data/detail/image_window.hpp"
#include "data/detail/resize.hpp"

namespace cnn::data {

int Dataset::label(std::size_t index) const {
  std::vector<float> scratch(shape().elements());
  return load(index, scratch.data());
}

int Dataset::load_window(std::size_t index, const WindowChooser& choose, bool mirror, float* out,
                         float* scratch) const {
  const int label = load(index, scratch);
  const SampleShape s = shape();
  const ImageWindow w = checked_window(choose, s.height, s.width);
  resize_window_chw(scratch, s.height, s.width, s.channels, out, s.height, s.width,
                    {double(w.top), double(w.left), double(w.height), double(w.width)}, mirror);
  return label;
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
