#pragma once
// 16-bit values on the device: the rounding of a float into bf16 or IEEE half (to nearest even;
// bf16 flushes a subnormal to a zero of its sign, as the CPU backend does) and its exact widening,
// and the values a kernel reads or writes either as floats or in 16 bits (Tensor::packed16), one
// at a time or V at a time.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include <cnnengine/engine/core/backend.hpp>

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

// What a kernel reads from and writes to a tensor: its 16-bit values where it has them, else its floats.
inline ValuesIn values_in(const Tensor& t) { return {t.data, static_cast<const std::uint16_t*>(t.packed16)}; }
inline ValuesOut values_out(const Tensor& t) { return {t.data, static_cast<std::uint16_t*>(t.packed16)}; }
// Where a kernel reads or writes a tensor's values: its 16-bit values if it has them, else its floats
// (for vector_width's alignment).
inline const void* read_from(const Tensor& t) { return t.packed16 ? t.packed16 : t.data; }

// V values from `at` on (V = 1, 4 or 8), read or written in one access where V > 1: `at` a multiple
// of V and the pointers 16-byte aligned (vector_width below).
template <ValueFormat F>
__device__ inline void widen_pair(std::uint32_t word, float& low, float& high) {
  low = widened<F>(static_cast<std::uint16_t>(word & 0xffffu));  // the lower address: little-endian
  high = widened<F>(static_cast<std::uint16_t>(word >> 16));
}
template <ValueFormat F>
__device__ inline std::uint32_t narrowed_pair(float low, float high) {
  return static_cast<std::uint32_t>(narrowed<F>(low)) | (static_cast<std::uint32_t>(narrowed<F>(high)) << 16);
}

template <ValueFormat F, int V>
__device__ void load_values(const ValuesIn& in, std::size_t at, float (&v)[V]) {
  static_assert(V == 1 || V == 4 || V == 8, "1, 4 or 8 values at a time");
  if (in.packed) {
    const std::uint16_t* p = in.packed + at;
    if constexpr (V == 8) {
      const uint4 raw = *reinterpret_cast<const uint4*>(p);
      widen_pair<F>(raw.x, v[0], v[1]);
      widen_pair<F>(raw.y, v[2], v[3]);
      widen_pair<F>(raw.z, v[4], v[5]);
      widen_pair<F>(raw.w, v[6], v[7]);
    } else if constexpr (V == 4) {
      const uint2 raw = *reinterpret_cast<const uint2*>(p);
      widen_pair<F>(raw.x, v[0], v[1]);
      widen_pair<F>(raw.y, v[2], v[3]);
    } else {
      v[0] = widened<F>(p[0]);
    }
  } else {
    const float* p = in.wide + at;
    if constexpr (V == 1) {
      v[0] = p[0];
    } else {
#pragma unroll
      for (int k = 0; k < V; k += 4) {
        const float4 f = *reinterpret_cast<const float4*>(p + k);
        v[k] = f.x;
        v[k + 1] = f.y;
        v[k + 2] = f.z;
        v[k + 3] = f.w;
      }
    }
  }
}

template <ValueFormat F, int V>
__device__ void store_values(const ValuesOut& out, std::size_t at, const float (&v)[V]) {
  static_assert(V == 1 || V == 4 || V == 8, "1, 4 or 8 values at a time");
  if (out.packed) {
    std::uint16_t* p = out.packed + at;
    if constexpr (V == 8) {
      *reinterpret_cast<uint4*>(p) = uint4{narrowed_pair<F>(v[0], v[1]), narrowed_pair<F>(v[2], v[3]),
                                           narrowed_pair<F>(v[4], v[5]), narrowed_pair<F>(v[6], v[7])};
    } else if constexpr (V == 4) {
      *reinterpret_cast<uint2*>(p) = uint2{narrowed_pair<F>(v[0], v[1]), narrowed_pair<F>(v[2], v[3])};
    } else {
      p[0] = narrowed<F>(v[0]);
    }
  } else {
    float* p = out.wide + at;
    if constexpr (V == 1) {
      p[0] = v[0];
    } else {
#pragma unroll
      for (int k = 0; k < V; k += 4) *reinterpret_cast<float4*>(p + k) = float4{v[k], v[k + 1], v[k + 2], v[k + 3]};
    }
  }
}

// The most values at a time (8, 4 or 1) that rows of `row` values may be read in from these
// pointers (null ones ignored): the row a multiple of it and every pointer 16-byte aligned.
inline int vector_width(std::size_t row, std::initializer_list<const void*> pointers) {
  for (const void* p : pointers)
    if (p && reinterpret_cast<std::uintptr_t>(p) % 16 != 0) return 1;
  return row % 8 == 0 ? 8 : row % 4 == 0 ? 4 : 1;
}

// launch(tag) with tag a std::integral_constant holding `format` as a compile-time ValueFormat:
// bf16 for a backend in fp32 or tf32, whose tensors have no 16-bit values to read.
template <class Launch>
void with_format(ValueFormat format, Launch&& launch) {
  if (format == ValueFormat::fp16) launch(std::integral_constant<ValueFormat, ValueFormat::fp16>{});
  else launch(std::integral_constant<ValueFormat, ValueFormat::bf16>{});
}

}  // namespace cnn::cuda
