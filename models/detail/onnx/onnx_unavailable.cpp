// export_onnx where ONNX or protobuf was not found at build time (onnx_export.cpp otherwise).
#include <cnnengine/base/error.hpp>
#include <cnnengine/models/onnx_export.hpp>

namespace cnn {

bool onnx_export_available() { return false; }

OnnxExportReport export_onnx(const std::filesystem::path& file, const Network&, const ParameterStore&,
                             const ModelDescription&, const OnnxExportOptions&) {
  throw ConfigError("ONNX export: this build of cnnengine has no ONNX export (ONNX and protobuf were not found "
                    "when it was built): install libonnx-dev and libprotobuf-dev (scripts/install_deps.sh) and "
                    "build it again; " + file.string() + " was not written");
}

}  // namespace cnn
