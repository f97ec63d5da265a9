#include <cnnengine/fit/output_kinds.hpp>

#include <array>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <system_error>

#include "memory/trace.hpp"
#include <cnnengine/models/checkpoint.hpp>

namespace cnn {
namespace {

namespace fs = std::filesystem;

// The first `bytes` bytes of the file (fewer when it is shorter).
std::string leading_bytes(const fs::path& path, std::size_t bytes) {
  std::ifstream in(path, std::ios::binary);
  std::string text(bytes, '\0');
  in.read(text.data(), static_cast<std::streamsize>(bytes));
  text.resize(static_cast<std::size_t>(in.gcount()));
  return text;
}

// A metrics file's first line is one JSON object with a "type" (what MetricsFile writes); read
// at most 1 MiB of it, so a large unrelated file is never loaded whole.
bool holds_metrics(const fs::path& path) {
  const std::string text = leading_bytes(path, 1 << 20);
  const std::size_t end = text.find('\n');
  if (end == std::string::npos) return false;
  const nlohmann::json line = nlohmann::json::parse(text.substr(0, end), nullptr, false);
  return line.is_object() && line.contains("type") && line["type"].is_string();
}

// An ONNX model is a protobuf ModelProto, with no magic number: its first field is ir_version
// (field 1, a varint, which the format requires and protobuf writes first), then a field of
// ModelProto that is a varint or length-delimited. No text file starts with byte 8 (backspace).
bool holds_onnx(const fs::path& path) {
  const std::string text = leading_bytes(path, 16);
  if (text.size() < 3 || text[0] != '\x08') return false;
  std::size_t i = 1;
  while (i < text.size() && i < 11 && (static_cast<unsigned char>(text[i]) & 0x80)) ++i;
  if (i + 1 >= text.size()) return false;
  const auto tag = static_cast<unsigned char>(text[i + 1]);
  const int field = tag >> 3, wire = tag & 7;
  return field >= 2 && field <= 25 && (wire == 0 || wire == 2);
}

}  // namespace

bool replaced_by_rename(OutputKind kind) {
  return kind == OutputKind::checkpoint || kind == OutputKind::onnx || kind == OutputKind::plot ||
         kind == OutputKind::csv || kind == OutputKind::algorithm_cache;
}

bool holds_output_of_kind(const fs::path& path, OutputKind kind) {
  std::error_code ec;
  if (fs::file_size(path, ec) == 0 && !ec) return true;
  static constexpr std::array<char, 8> kPng = {'\x89', 'P', 'N', 'G', '\r', '\n', '\x1a', '\n'};
  switch (kind) {
    case OutputKind::checkpoint: return is_checkpoint(path);
    case OutputKind::onnx: return holds_onnx(path);
    case OutputKind::plot: return leading_bytes(path, kPng.size()) == std::string(kPng.begin(), kPng.end());
    case OutputKind::metrics: return holds_metrics(path);
    case OutputKind::csv: return leading_bytes(path, 6) == "epoch,";
    case OutputKind::trace:
      return leading_bytes(path, memory::kTraceHeader.size()) == memory::kTraceHeader;
    case OutputKind::algorithm_cache: return true;  // its own code refuses a foreign file, and keeps it
    case OutputKind::folder: return false;          // a file where a folder should be
  }
  return false;
}

std::string describe(OutputKind kind) {
  switch (kind) {
    case OutputKind::checkpoint: return "a cnnengine checkpoint";
    case OutputKind::onnx: return "an ONNX model";
    case OutputKind::plot: return "a PNG";
    case OutputKind::metrics: return "a metrics file of JSON lines";
    case OutputKind::csv: return "a CSV file of epochs";
    case OutputKind::trace: return "a cnnengine memory trace";
    case OutputKind::algorithm_cache: return "a cnnengine algorithm cache";
    case OutputKind::folder: return "a folder";
  }
  return "";
}

}  // namespace cnn
