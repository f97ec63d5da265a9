#pragma once
// Values rounded as a 16-bit product's operands are (to nearest even, by the CPU backend's own
// conversions), kept as floats: what the tests multiply in float to get a 16-bit product's exact
// expectation.
#include <vector>

#include "backends/cpu/detail/gemm16.hpp"
#include <cnnengine/engine/core/backend.hpp>

namespace cnn::testing {

inline float rounded16(ValueFormat format, float x) {
  if (format == ValueFormat::bf16) return cpu::from_bf16(cpu::to_bf16(x));
  if (format == ValueFormat::fp16) return cpu::from_fp16(cpu::to_fp16(x));
  return x;
}

// `values` rounded to `precision`'s 16-bit format; unchanged in fp32 and tf32.
inline std::vector<float> rounded16(Precision precision, std::vector<float> values) {
  for (float& v : values) v = rounded16(value_format(precision), v);
  return values;
}

}  // namespace cnn::testing
