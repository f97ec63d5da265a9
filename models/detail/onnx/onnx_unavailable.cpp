// export_onnx and import_onnx where ONNX or protobuf was not found at build time (onnx_export.cpp
// and onnx_import.cpp otherwise).
#include <cnnengine/base/error.hpp>
#include <cnnengine/models/onnx_export.hpp>
#include <cnnengine/models/onnx_import.hpp>

namespace cnn {

bool onnx_export_available() { return false; }

OnnxExportReport export_onnx(const std::filesystem::path& file, const Network&, const ParameterStore&,
                             const ModelDescription&, const OnnxExportOptions&) {
  throw ConfigError("ONNX export: this build of cnnengine has no ONNX export (ONNX and protobuf were not found "
                    "when it was built): install libonnx-dev and libprotobuf-dev (scripts/install_deps.sh) and "
                    "build it again; " + file.string() + " was not written");
}

bool onnx_import_available() { return false; }

ImportedModel import_onnx(const std::filesystem::path& path, const OnnxImportOptions&) {
  throw ConfigError("ONNX import: this build of cnnengine reads no ONNX (ONNX and protobuf were not found when it "
                    "was built): install libonnx-dev and libprotobuf-dev (scripts/install_deps.sh) and build it "
                    "again; " + path.string() + " was not read");
}

}  // namespace cnn
