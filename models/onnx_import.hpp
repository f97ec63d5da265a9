#pragma once
// Import from ONNX: a model another engine exported (torch.onnx.export of torchvision's
// classification networks, our own export_onnx) read into a Network with its weights, so that a
// run can start from a trained network, evaluate it, predict with it or convert it.
//
// What it reads: opsets 11 to 21 of the default domain, one image input [N, C, H, W] of fixed C,
// H and W (N symbolic or fixed), the graph's first output (the rest, such as our export's
// "probabilities", is left out). Each operator becomes the layer of PyTorch's definition that
// computes it (docs/design.md, "ONNX import", lists them): Conv, ConvTranspose,
// BatchNormalization, the activations and the patterns exporters write for SiLU, HardSwish and
// GELU, Add, Mul, Concat, the poolings, Flatten and the Shape/Gather/Unsqueeze/Concat/Reshape
// chains before a classifier (folded as constants), Gemm, MatMul, Dropout, Identity, Resize,
// GroupNormalization and InstanceNormalization. An operator, attribute or value our layers cannot
// express (a 1x3 kernel, asymmetric padding, a weight computed at run time) is a ConfigError
// naming the node, its operator and what to do; nothing is guessed.
//
// The file is bounded as our checkpoints are: its size, its node count and each tensor's size
// (checked against the bytes that hold it) are checked before anything is allocated for them; a
// truncated or foreign file is a ConfigError naming it. Weights in an external data file are
// refused.
//
// Where the file is one of our own exports, its metadata (task, class names, normalisation)
// comes back in the description; otherwise the task is a classification (a segmentation where
// the output is [K, H, W] at the input's size), the classes are numbered and there is no
// normalisation.
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include <cnnengine/engine/core/network.hpp>
#include <cnnengine/models/checkpoint.hpp>

namespace cnn {

inline constexpr std::size_t kMaxOnnxFileBytes = std::size_t{2} << 30;  // protobuf's own limit
inline constexpr int kMaxOnnxNodes = 100000;
inline constexpr int kOnnxImportOpsetLow = 11, kOnnxImportOpsetHigh = 21;

struct ImportedModel {
  Network network;
  ModelDescription description;
  // Every parameter and running statistic, in the order of a ParameterStore's parameter block
  // (ParameterStore::places; ParameterStore::upload takes them as they are).
  std::vector<float> parameters;
  // What the import did that a user may want to know ("the final Softmax left out: the network
  // gives logits").
  std::vector<std::string> notes;
};

// Whether this build of cnnengine reads ONNX (built with ONNX and protobuf, as the export).
bool onnx_import_available();

// Whether `path` names an ONNX file: a regular file whose name ends in ".onnx" (any case) that
// is not a cnnengine checkpoint. Where a checkpoint is accepted, such a file is imported.
bool is_onnx_file(const std::filesystem::path& path);

struct OnnxImportOptions {
  // The image's height and width where the file leaves them symbolic (exported with dynamic
  // axes: the network runs at any size, the import plans one); 0 refuses such a file. A file
  // whose size is fixed must be given that size or none.
  int height = 0, width = 0;
};

// Reads `path`. Throws ConfigError naming the file (and the node, where one is at fault); a file
// that cannot be read is a cnn::Error naming it.
ImportedModel import_onnx(const std::filesystem::path& path, const OnnxImportOptions& options = {});

}  // namespace cnn
