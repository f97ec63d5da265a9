#pragma once
// An exported model in float16 (OnnxExportOptions::fp16): every weight and every value between
// the layers in half precision, the model's input and outputs float32 as in the fp32 export
// (a Cast after the input and before each output), so that a user's code feeds and reads it
// unchanged. Built only where ONNX is found (the root CMakeLists.txt).
#include <onnx/onnx_pb.h>

#include <cstdint>

#include <cnnengine/models/onnx_export.hpp>

namespace cnn {

// float -> IEEE half bits, to nearest with ties to even; a value beyond the largest half
// (65504) becomes the largest half of its sign, not infinity (a weight that large saturates);
// NaN stays NaN and infinity infinity.
std::uint16_t to_float16(float value);

// Rewrites a finished fp32 model (models/detail/onnx/onnx_graph.hpp's graph) as above. Float
// initializers become float16 but Resize's scales and region of interest, which ONNX wants in
// float whatever the data's type. Returns the weights that saturated.
OnnxExportReport convert_to_float16(onnx::ModelProto& model);

}  // namespace cnn
