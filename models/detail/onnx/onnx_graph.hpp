#pragma once
// The network as an ONNX graph, in inference form: what models/onnx_export.hpp describes.
// Built only where ONNX is found (the root CMakeLists.txt).
#include <onnx/onnx_pb.h>

#include "engine/core/network.hpp"
#include "engine/core/parameter_store.hpp"

namespace cnn {

// Fills `graph`: its input, one or more nodes per layer (its type's onnx, layers/registry.hpp),
// the parameters as initializers, every intermediate value's shape as ours (value_info: shape
// inference then checks each against ONNX's), and the outputs. Throws ConfigError naming a
// layer ONNX cannot express.
void write_onnx_graph(onnx::GraphProto& graph, const Network& network, const ParameterStore& params,
                      bool probabilities);

}  // namespace cnn
