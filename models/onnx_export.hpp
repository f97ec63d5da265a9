#pragma once
// Export to ONNX: the network in inference form (BatchNorm with its running statistics, Dropout
// gone), its parameters as initializers, and what the file's user needs to feed it (metadata).
//
//   input  "images"         float32 [N, C, H, W], N symbolic: pixels scaled to [0, 1], then
//                           (x - mean) / std per channel
//   output "logits"         float32 [N, classes]
//   output "probabilities"  float32 [N, classes], their softmax (OnnxExportOptions)
//
// metadata_props: "class_names", "normalization_mean" and "normalization_std" (JSON arrays, one
// value per channel: 0 and 1 where the model has no normalisation), "pixel_scale" ("1/255"),
// "input_shape" ("CxHxW") and "cnnengine_network" (the network's text form).
//
// The exporter is built when ONNX and protobuf are found (CNN_ONNX=AUTO|ON|OFF); without them
// export_onnx throws a ConfigError saying so and which packages to install.
#include <filesystem>

#include "engine/core/network.hpp"
#include "engine/core/parameter_store.hpp"
#include "models/checkpoint.hpp"

namespace cnn {

inline constexpr int kOnnxOpset = 13;
inline constexpr const char* kOnnxInputName = "images";
inline constexpr const char* kOnnxLogitsName = "logits";
inline constexpr const char* kOnnxProbabilitiesName = "probabilities";

struct OnnxExportOptions {
  bool probabilities = true;  // a second output: the softmax of the logits
};

// Whether this build of cnnengine can export to ONNX.
bool onnx_export_available();

// Writes `network` with the parameters in `params` to `file` (atomically: a failure leaves the
// file as it was). The model is checked with onnx's checker and shape inference before it is
// written. A layer ONNX cannot express (a layer of one's own whose type, layers/registry.hpp,
// writes no ONNX nodes), parameters of another network or class names that are not one per
// output are a ConfigError naming it; a model over protobuf's 2 GiB too. A file that cannot be
// written is a cnn::Error naming it.
void export_onnx(const std::filesystem::path& file, const Network& network, const ParameterStore& params,
                 const ModelDescription& model, const OnnxExportOptions& options = {});

}  // namespace cnn
