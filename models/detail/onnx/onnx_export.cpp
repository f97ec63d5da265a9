// export_onnx where ONNX and protobuf were found (onnx_unavailable.cpp otherwise).
#include <cnnengine/models/onnx_export.hpp>

#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>

#include <climits>
#include <exception>
#include <stdexcept>
#include <string>

#include "base/atomic_file.hpp"
#include <cnnengine/base/error.hpp>
#include <cnnengine/memory/memory_resource.hpp>
#include "models/detail/onnx/onnx_float16.hpp"
#include "models/detail/onnx/onnx_graph.hpp"
#include "models/detail/onnx/onnx_metadata.hpp"

namespace cnn {
namespace {

// A trainer's store and a predictor's hold the same parameters and running statistics; they
// differ in what else they keep (gradients, optimizer state, a second copy of the statistics).
void check_parameters_of(const Network& network, const ParameterStore& params) {
  const std::size_t expected = ParameterStore::planned_parameter_floats(network), held = params.total_floats();
  if (expected != held)
    throw ConfigError("ONNX export: the parameters are not this network's (" + std::to_string(held) +
                      " floats of parameters and statistics for a network of " + std::to_string(expected) + ")");
}

// What the graph gives for the model's task (models/onnx_export.hpp).
OnnxOutputs task_outputs(const Network& network, Task task, bool probabilities) {
  const Shape& out = network.output_shape();
  const Shape flat{static_cast<int>(out.elements())};
  switch (task) {
    case Task::segment: {
      const Shape& in = network.input_shape();
      if (out.rank != 3 || out[1] != in[1] || out[2] != in[2])
        throw ConfigError("ONNX export: a segmentation network's output must be [classes, " + std::to_string(in[1]) +
                          ", " + std::to_string(in[2]) + "] (a score per class and pixel of its " + in.str() +
                          " input), but " + network.node(network.last()).name + " gives " + out.str());
      return {kOnnxLogitsName, out, probabilities ? "Softmax" : ""};
    }
    case Task::multilabel: return {kOnnxLogitsName, flat, probabilities ? "Sigmoid" : ""};
    case Task::regress: return {kOnnxValuesName, flat, ""};
    case Task::classify: break;
  }
  return {kOnnxLogitsName, flat, probabilities ? "Softmax" : ""};
}

// onnx's checker, then its shape inference in strict mode: every value's shape as ONNX computes
// it must be the one we declared (value_info), which is ours. A failure is the exporter's bug.
void check(onnx::ModelProto& model) {
  try {
    onnx::checker::check_model(model);
    onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions{/*check_type=*/true, /*error_mode=*/1});
  } catch (const std::exception& e) {
    throw std::logic_error(std::string("ONNX export: the model fails onnx's checks: ") + e.what());
  }
}

// Protobuf's output stream over an AtomicFile. Protobuf's code is not written to be unwound
// through: a write error is kept and rethrown once serialisation has returned.
class AtomicFileStream final : public google::protobuf::io::CopyingOutputStream {
 public:
  explicit AtomicFileStream(AtomicFile& file) : file_(file) {}
  bool Write(const void* buffer, int size) override {
    try {
      file_.write(buffer, static_cast<std::size_t>(size));
      return true;
    } catch (...) {
      error_ = std::current_exception();
      return false;
    }
  }
  void rethrow_error() const {
    if (error_) std::rethrow_exception(error_);
  }

 private:
  AtomicFile& file_;
  std::exception_ptr error_;
};

void write_file(const onnx::ModelProto& model, const std::filesystem::path& path) {
  if (model.ByteSizeLong() > static_cast<std::size_t>(INT_MAX))
    throw ConfigError("ONNX export: the model takes " + std::to_string(model.ByteSizeLong()) +
                      " bytes, more than the 2 GiB protobuf can write in one file; " + path.string() + " was not written");
  AtomicFile file(path);
  AtomicFileStream stream(file);
  bool written = false;
  {
    google::protobuf::io::CopyingOutputStreamAdaptor adaptor(&stream);
    written = model.SerializeToZeroCopyStream(&adaptor) && adaptor.Flush();
  }
  stream.rethrow_error();
  if (!written) throw Error("writing " + path.string() + " failed: protobuf could not serialise the model");
  file.commit();
}

}  // namespace

bool onnx_export_available() { return true; }

OnnxExportReport export_onnx(const std::filesystem::path& file, const Network& network, const ParameterStore& params,
                             const ModelDescription& model, const OnnxExportOptions& options) {
  check_parameters_of(network, params);
  onnx::ModelProto proto;
  proto.set_ir_version(onnx::IR_VERSION_2020_5_8);  // 7: the IR of opset 13
  proto.set_producer_name("cnnengine");
  auto* opset = proto.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOnnxOpset);
  auto* graph = proto.mutable_graph();
  graph->set_name("cnnengine");
  const OnnxOutputs outputs = task_outputs(network, model.loss.task, options.probabilities);
  write_onnx_graph(*graph, network, params, outputs);
  graph->mutable_input(0)->set_doc_string(
      "N x C x H x W float32: pixels scaled to [0, 1] (pixel_scale), then (x - mean) / std per channel "
      "(normalization_mean, normalization_std)");
  write_onnx_metadata(proto, network, model, outputs.shape[0], options.fp16);  // the classes or targets
  OnnxExportReport report;
  if (options.fp16) report = convert_to_float16(proto);
  check(proto);
  write_file(proto, file);
  return report;
}

}  // namespace cnn
