#include "network_copy.hpp"

#include <string>

#include <cnnengine/base/error.hpp>
#include <cnnengine/models/network_text.hpp>

namespace cnn::python {

Shape checked_input(Shape input) {
  for (int i = 0; i < input.rank; ++i)
    if (input[i] < 1 || input[i] > kMaxInputSide)
      throw ShapeError("input_shape " + input.str() + ": each side from 1 to " + std::to_string(kMaxInputSide));
  if (input.elements() > kMaxInputElements)
    throw ShapeError("input_shape " + input.str() + ": more than " + std::to_string(kMaxInputElements) +
                     " values a sample");
  return input;
}

Network copy_network(const Network& network) {
  if (network.size() < 2) throw ShapeError("the network has no layers: add some first");
  Network copy = parse_network(network_text(network), network.input_shape(), 0, "<network>");
  copy.set_loss(network.loss());
  copy.set_frozen_mode(network.frozen_mode());
  copy.freeze_through(network.frozen_through());
  return copy;
}

}  // namespace cnn::python
