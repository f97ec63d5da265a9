#include <cnnengine/engine/core/backend.hpp>

namespace cnn {

std::string to_string(Precision precision) {
  switch (precision) {
    case Precision::fp32: return "fp32";
    case Precision::tf32: return "tf32";
    case Precision::bf16: return "bf16";
    case Precision::fp16: return "fp16";
  }
  return "fp32";
}

Precision parse_precision(std::string_view word) {
  for (Precision p : {Precision::fp32, Precision::tf32, Precision::bf16, Precision::fp16})
    if (word == to_string(p)) return p;
  throw ConfigError("unknown precision '" + std::string(word) + "': use fp32, tf32, bf16 or fp16");
}

ValueFormat value_format(Precision precision) {
  switch (precision) {
    case Precision::bf16: return ValueFormat::bf16;
    case Precision::fp16: return ValueFormat::fp16;
    default: return ValueFormat::fp32;
  }
}

void require_16bit(const char* call, ValueFormat format) {
  if (format == ValueFormat::fp32) throw ConfigError(std::string(call) + ": fp32 is not a 16-bit format");
}

std::string to_string(ValueFormat format) {
  switch (format) {
    case ValueFormat::fp32: return "fp32";
    case ValueFormat::bf16: return "bf16";
    case ValueFormat::fp16: return "fp16";
  }
  return "fp32";
}

}  // namespace cnn
