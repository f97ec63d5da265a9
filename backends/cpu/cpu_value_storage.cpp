// 16-bit values (Backend::to_16bit, from_16bit): bfloat16 with the products' rounding
// (backends/cpu/detail/bf16_gemm.hpp's to_bf16), IEEE half through Eigen's.
#include <Eigen/Core>
#include <cstdint>
#include <cstring>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/detail/bf16_gemm.hpp"
#include "backends/cpu/detail/parallel.hpp"

namespace cnn {
namespace {

void refuse_fp32(const char* call, ValueFormat format) {
  if (format == ValueFormat::fp32) throw ConfigError(std::string(call) + ": fp32 is not a 16-bit format");
}

}  // namespace

void CpuBackend::to_16bit(const Tensor& x, void* packed, ValueFormat format) {
  refuse_fp32("to_16bit", format);
  const float* in = x.data;
  auto* out = static_cast<std::uint16_t*>(packed);
  const bool bf16 = format == ValueFormat::bf16;
  cpu::parallel_elements(threads_, x.elements(), [&](std::size_t b, std::size_t e) {
    if (bf16) {
      for (std::size_t i = b; i < e; ++i) out[i] = cpu::to_bf16(in[i]);
    } else {
      for (std::size_t i = b; i < e; ++i) {
        const Eigen::half h(in[i]);
        std::memcpy(out + i, &h, sizeof h);
      }
    }
  });
}

void CpuBackend::from_16bit(const void* packed, Tensor x, ValueFormat format) {
  refuse_fp32("from_16bit", format);
  const auto* in = static_cast<const std::uint16_t*>(packed);
  float* out = x.data;
  const bool bf16 = format == ValueFormat::bf16;
  cpu::parallel_elements(threads_, x.elements(), [&](std::size_t b, std::size_t e) {
    if (bf16) {
      for (std::size_t i = b; i < e; ++i) out[i] = cpu::from_bf16(in[i]);
    } else {
      for (std::size_t i = b; i < e; ++i) out[i] = static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(in[i]));
    }
  });
}

}  // namespace cnn
