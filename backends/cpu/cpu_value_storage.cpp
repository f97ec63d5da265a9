// 16-bit values (Backend::to_16bit, from_16bit): bfloat16 with the products' rounding
// (backends/cpu/detail/gemm16.hpp's to_bf16; vcvtneps2bf16 gives the same bits, Note [One 16-bit
// product on every host]), IEEE half as the fp16 products round it (to_fp16, vcvtps2ph).
// Memory-bound passes: 16 values at a time where the host has AVX-512 (AVX512-BF16 to narrow to
// bfloat16), the scalar forms for the rest.
#include <immintrin.h>

#include <cstdint>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/detail/cpu_isa.hpp"
#include "backends/cpu/detail/gemm16.hpp"
#include "backends/cpu/detail/parallel.hpp"

namespace cnn {
namespace {

// Each converts [b, e) 16 values at a time; returns where the scalar loop takes over.
CNN_TARGET_AVX512_BF16 std::size_t to_bf16_avx512(const float* in, std::uint16_t* out, std::size_t b, std::size_t e) {
  for (; b + 16 <= e; b += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + b),
                        reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_loadu_ps(in + b))));
  return b;
}

CNN_TARGET_AVX512 std::size_t from_bf16_avx512(const std::uint16_t* in, float* out, std::size_t b, std::size_t e) {
  for (; b + 16 <= e; b += 16) {
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + b)));
    _mm512_storeu_ps(out + b, _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16)));
  }
  return b;
}

// IEEE half: vcvtps2ph rounds as Eigen's conversion does (to nearest, ties to even), and
// vcvtph2ps widens exactly.
CNN_TARGET_AVX512 std::size_t to_fp16_avx512(const float* in, std::uint16_t* out, std::size_t b, std::size_t e) {
  for (; b + 16 <= e; b += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + b),
                        _mm512_cvtps_ph(_mm512_loadu_ps(in + b), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  return b;
}

CNN_TARGET_AVX512 std::size_t from_fp16_avx512(const std::uint16_t* in, float* out, std::size_t b, std::size_t e) {
  for (; b + 16 <= e; b += 16)
    _mm512_storeu_ps(out + b, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + b))));
  return b;
}

std::size_t to_bf16_vectors(const float* in, std::uint16_t* out, std::size_t b, std::size_t e) {
  return cpu::isa() >= cpu::CpuIsa::avx512_bf16 ? to_bf16_avx512(in, out, b, e) : b;
}
std::size_t from_bf16_vectors(const std::uint16_t* in, float* out, std::size_t b, std::size_t e) {
  return cpu::isa() >= cpu::CpuIsa::avx512 ? from_bf16_avx512(in, out, b, e) : b;
}
std::size_t to_fp16_vectors(const float* in, std::uint16_t* out, std::size_t b, std::size_t e) {
  return cpu::isa() >= cpu::CpuIsa::avx512 ? to_fp16_avx512(in, out, b, e) : b;
}
std::size_t from_fp16_vectors(const std::uint16_t* in, float* out, std::size_t b, std::size_t e) {
  return cpu::isa() >= cpu::CpuIsa::avx512 ? from_fp16_avx512(in, out, b, e) : b;
}

}  // namespace

void CpuBackend::do_to_16bit(const Tensor& x, void* packed, ValueFormat format) {
  const float* in = x.data;
  auto* out = static_cast<std::uint16_t*>(packed);
  const bool bf16 = format == ValueFormat::bf16;
  cpu::parallel_elements(threads_, x.elements(), [&](std::size_t b, std::size_t e) {
    if (bf16) {
      for (std::size_t i = to_bf16_vectors(in, out, b, e); i < e; ++i) out[i] = cpu::to_bf16(in[i]);
    } else {
      for (std::size_t i = to_fp16_vectors(in, out, b, e); i < e; ++i) out[i] = cpu::to_fp16(in[i]);
    }
  });
}

void CpuBackend::do_from_16bit(const void* packed, Tensor x, ValueFormat format) {
  const auto* in = static_cast<const std::uint16_t*>(packed);
  float* out = x.data;
  const bool bf16 = format == ValueFormat::bf16;
  cpu::parallel_elements(threads_, x.elements(), [&](std::size_t b, std::size_t e) {
    if (bf16) {
      for (std::size_t i = from_bf16_vectors(in, out, b, e); i < e; ++i) out[i] = cpu::from_bf16(in[i]);
    } else {
      for (std::size_t i = from_fp16_vectors(in, out, b, e); i < e; ++i) out[i] = cpu::from_fp16(in[i]);
    }
  });
}

}  // namespace cnn
