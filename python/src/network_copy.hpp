#pragma once
// What the bindings check of a network handed in from Python, and the copy a model keeps of it.
#include <cnnengine/engine/core/network.hpp>

namespace cnn::python {

// The input shape as given, or a ShapeError naming it: every side from 1 to kMaxInputSide, one
// sample at most kMaxInputElements.
Shape checked_input(Shape input);

// A network of the same layers on the same inputs, its loss and frozen nodes (through its text
// form): a model keeps its own, and the Python object stays the caller's to change.
Network copy_network(const Network& network);

}  // namespace cnn::python
