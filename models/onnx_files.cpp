// Which files are ONNX models: where a checkpoint is accepted, one of these is imported.
#include <algorithm>
#include <cctype>

#include "base/regular_file.hpp"
#include <cnnengine/models/checkpoint.hpp>
#include <cnnengine/models/onnx_import.hpp>

namespace cnn {

bool is_onnx_file(const std::filesystem::path& path) {
  std::string extension = path.extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return extension == ".onnx" && regular_file_problem(path).empty() && !is_checkpoint(path);
}

}  // namespace cnn
