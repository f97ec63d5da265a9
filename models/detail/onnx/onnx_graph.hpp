#pragma once
// The network as an ONNX graph, in inference form: what models/onnx_export.hpp describes.
// Built only where ONNX is found (the root CMakeLists.txt).
#include <onnx/onnx_pb.h>

#include <string>

#include <cnnengine/engine/core/network.hpp>
#include <cnnengine/engine/core/parameter_store.hpp>

namespace cnn {

// The graph's outputs: the first, `name`, is the last layer's output of per-sample `shape` (the
// layer's own, or rank 1: flattened); where `probabilities` names an operator ("Softmax" over
// axis 1, or "Sigmoid"), a second output "probabilities", that operator on the first.
struct OnnxOutputs {
  std::string name;
  Shape shape;
  std::string probabilities;  // empty: none
};

// Fills `graph`: its input, one or more nodes per layer (its type's onnx, layers/registry.hpp),
// the parameters as initializers, every intermediate value's shape as ours (value_info: shape
// inference then checks each against ONNX's), and the outputs. Throws ConfigError naming a
// layer ONNX cannot express.
void write_onnx_graph(onnx::GraphProto& graph, const Network& network, const ParameterStore& params,
                      const OnnxOutputs& outputs);

}  // namespace cnn
