// 16-bit values (Backend::to_16bit, from_16bit) and the 16-bit copies of a product's operands (Note
// [16-bit products on CUDA], conv.cpp): CUDA's own conversions, to nearest with ties to even. bf16
// flushes a subnormal to a zero of its sign, as the CPU backend does, so that the two backends
// store the same bits.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>

#include "backends/cuda/detail/check.hpp"
#include "backends/cuda/detail/cuda_backend_impl.hpp"
#include "backends/cuda/detail/grid_stride.cuh"
#include "base/error.hpp"

namespace cnn::cuda {
namespace {

__device__ float flushed(float v) { return fabsf(v) < 1.17549435e-38f ? copysignf(0.0f, v) : v; }

__global__ void to_bf16_kernel(const float* x, __nv_bfloat16* y, std::size_t n) {
  CNN_FOR_EACH_ELEMENT(i, n) y[i] = __float2bfloat16_rn(flushed(x[i]));
}
__global__ void from_bf16_kernel(const __nv_bfloat16* x, float* y, std::size_t n, bool accumulate) {
  CNN_FOR_EACH_ELEMENT(i, n) y[i] = accumulate ? y[i] + __bfloat162float(x[i]) : __bfloat162float(x[i]);
}
__global__ void to_fp16_kernel(const float* x, __half* y, std::size_t n) {
  CNN_FOR_EACH_ELEMENT(i, n) y[i] = __float2half_rn(x[i]);
}
__global__ void from_fp16_kernel(const __half* x, float* y, std::size_t n, bool accumulate) {
  CNN_FOR_EACH_ELEMENT(i, n) y[i] = accumulate ? y[i] + __half2float(x[i]) : __half2float(x[i]);
}

}  // namespace

void CudaBackend::narrow16(const float* x, void* packed, std::size_t n, ValueFormat format) {
  if (n == 0) return;
  if (format == ValueFormat::bf16) {
    to_bf16_kernel<<<blocks_for(n), 256, 0, compute_>>>(x, static_cast<__nv_bfloat16*>(packed), n);
    check_launch("to_bf16_kernel");
  } else {
    to_fp16_kernel<<<blocks_for(n), 256, 0, compute_>>>(x, static_cast<__half*>(packed), n);
    check_launch("to_fp16_kernel");
  }
}

void CudaBackend::widen16(const void* packed, float* x, std::size_t n, ValueFormat format, bool accumulate) {
  if (n == 0) return;
  if (format == ValueFormat::bf16) {
    from_bf16_kernel<<<blocks_for(n), 256, 0, compute_>>>(static_cast<const __nv_bfloat16*>(packed), x, n, accumulate);
    check_launch("from_bf16_kernel");
  } else {
    from_fp16_kernel<<<blocks_for(n), 256, 0, compute_>>>(static_cast<const __half*>(packed), x, n, accumulate);
    check_launch("from_fp16_kernel");
  }
}

void CudaBackend::to_16bit(const Tensor& x, void* packed, ValueFormat format) {
  require_16bit("to_16bit", format);
  activate();
  const std::size_t n = x.elements();
  if (n == 0) return;
  narrow16(x.data, packed, n, format);
  touched(x, DeviceRange{packed, n * 2});
}

void CudaBackend::from_16bit(const void* packed, Tensor x, ValueFormat format) {
  require_16bit("from_16bit", format);
  activate();
  const std::size_t n = x.elements();
  if (n == 0) return;
  widen16(packed, x.data, n, format, false);
  touched(DeviceRange{packed, n * 2}, x);
}

}  // namespace cnn::cuda
