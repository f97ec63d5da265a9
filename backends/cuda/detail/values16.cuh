#pragma once
// 16-bit values on the device: the rounding of a float into bf16 or IEEE half (to nearest even;
// bf16 flushes a subnormal to a zero of its sign, as the CPU backend does) and its exact widening,
// and the values an element-wise kernel reads or writes either as floats or in 16 bits
// (Tensor::packed16).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>

#include "engine/core/backend.hpp"

namespace cnn::cuda {

__device__ inline float flushed(float v) { return fabsf(v) < 1.17549435e-38f ? copysignf(0.0f, v) : v; }

template <ValueFormat F>
__device__ std::uint16_t narrowed(float v) {
  if constexpr (F == ValueFormat::bf16) return __bfloat16_as_ushort(__float2bfloat16_rn(flushed(v)));
  else return __half_as_ushort(__float2half_rn(v));
}

template <ValueFormat F>
__device__ float widened(std::uint16_t bits) {
  if constexpr (F == ValueFormat::bf16) return __bfloat162float(__ushort_as_bfloat16(bits));
  else return __half2float(__ushort_as_half(bits));
}

// What a kernel reads: the 16-bit values where there are some, else the floats.
struct ValuesIn {
  const float* wide = nullptr;
  const std::uint16_t* packed = nullptr;

  template <ValueFormat F>
  __device__ float at(std::size_t i) const {
    return packed ? widened<F>(packed[i]) : wide[i];
  }
};

// What a kernel writes: the 16-bit values where the output has them, else the floats.
struct ValuesOut {
  float* wide = nullptr;
  std::uint16_t* packed = nullptr;

  template <ValueFormat F>
  __device__ void set(std::size_t i, float v) const {
    if (packed) packed[i] = narrowed<F>(v);
    else wide[i] = v;
  }
};

}  // namespace cnn::cuda
