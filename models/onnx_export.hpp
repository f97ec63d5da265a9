#pragma once
// Export to ONNX: the network in inference form (BatchNorm with its running statistics, Dropout
// gone), its parameters as initializers, and what the file's user needs to feed it (metadata).
// Its outputs are those of the task the model was trained for (ModelDescription::loss.task):
//
//   input  "images"         float32 [N, C, H, W], N symbolic: pixels scaled to [0, 1], then
//                           (x - mean) / std per channel
//   classify    "logits"         float32 [N, K]
//               "probabilities"  float32 [N, K], their softmax over the classes (axis 1)
//   segment     "logits"         float32 [N, K, H, W], a score per class and pixel
//               "probabilities"  float32 [N, K, H, W], their softmax over the classes (axis 1)
//   multilabel  "logits"         float32 [N, K]
//               "probabilities"  float32 [N, K], each label's sigmoid (independent labels)
//   regress     "values"         float32 [N, T], the targets (no probabilities)
//
// "probabilities" only with OnnxExportOptions::probabilities (the default). With
// OnnxExportOptions::fp16 the weights and every value between the layers are float16 (half the
// file; a weight beyond 65504 saturates there), the input and outputs float32 as above, through a
// Cast after the input and one before each output (models/detail/onnx/onnx_float16.hpp); the
// metadata's "precision" says which ("fp32" or "fp16").
//
// metadata_props: "task" (classify, segment, multilabel or regress), "class_names" (one per class,
// or per target of a regression), "normalization_mean" and "normalization_std" (JSON arrays, one
// value per channel: 0 and 1 where the model has no normalisation), "pixel_scale" ("1/255"),
// "input_shape" ("CxHxW"), "cnnengine_network" (the network's text form), and for multilabel
// "threshold" (a label is predicted where its probability is above it).
//
// The exporter is built when ONNX and protobuf are found (CNN_ONNX=AUTO|ON|OFF); without them
// export_onnx throws a ConfigError saying so and which packages to install.
#include <cstddef>
#include <filesystem>
#include <string>

#include <cnnengine/engine/core/network.hpp>
#include <cnnengine/engine/core/parameter_store.hpp>
#include <cnnengine/models/checkpoint.hpp>

namespace cnn {

inline constexpr int kOnnxOpset = 13;
inline constexpr const char* kOnnxInputName = "images";
inline constexpr const char* kOnnxLogitsName = "logits";
inline constexpr const char* kOnnxProbabilitiesName = "probabilities";
inline constexpr const char* kOnnxValuesName = "values";

struct OnnxExportOptions {
  bool probabilities = true;  // a second output: the softmax (multilabel: sigmoid) of the logits
  bool fp16 = false;          // weights and values in float16, input and outputs float32
};

// What an export changed of the weights: in float16, those beyond half's range (65504 either way)
// saturate to its largest value, of their sign. None in fp32.
struct OnnxExportReport {
  std::size_t saturated = 0;  // weights written as +-65504
  float largest = 0;          // the largest |weight| among them
  std::string where;          // the initializer that holds it ("conv2d_1_weight")
};

// Whether this build of cnnengine can export to ONNX.
bool onnx_export_available();

// Writes `network` with the parameters in `params` to `file` (atomically: a failure leaves the
// file as it was). The model is checked with onnx's checker and shape inference before it is
// written. A layer ONNX cannot express (a layer of one's own whose type, layers/registry.hpp,
// writes no ONNX nodes), parameters of another network, class names that are not one per class
// (segment: per output channel) or target, and a segmentation network whose output is not
// [K, H, W] at the input's H x W are a ConfigError naming it; a model over protobuf's 2 GiB too.
// A file that cannot be written is a cnn::Error naming it. Returns what fp16 saturated, for the
// caller to say.
OnnxExportReport export_onnx(const std::filesystem::path& file, const Network& network, const ParameterStore& params,
                             const ModelDescription& model, const OnnxExportOptions& options = {});

}  // namespace cnn
