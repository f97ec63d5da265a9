// ReLU and add where a value is in 16 bits (Tensor::packed16): the kernels read each input from
// its 16-bit values where it has them, else from its floats, compute in float as the float kernels
// do, and round the output into its 16-bit values where it has them. A step on a 16-bit plan so
// hands these layers their values as it stores them (Layer::packed_values), with no float copies
// in between: the bits are those of widening, computing in float and rounding, as before.
#include <cstddef>
#include <initializer_list>
#include <string>

#include "backends/cuda/detail/check.hpp"
#include "backends/cuda/detail/cuda_backend_impl.hpp"
#include "backends/cuda/detail/grid_stride.cuh"
#include "backends/cuda/detail/values16.cuh"
#include <cnnengine/base/error.hpp>

namespace cnn::cuda {
namespace {

template <ValueFormat F>
__global__ void relu_forward16_kernel(ValuesIn x, ValuesOut y, std::size_t n) {
  CNN_FOR_EACH_ELEMENT(i, n) {
    const float v = x.at<F>(i);
    y.set<F>(i, v > 0.0f ? v : 0.0f);
  }
}

template <ValueFormat F, bool Accumulate>
__global__ void relu_backward16_kernel(ValuesIn y, const float* dy, float* dx, std::size_t n) {
  CNN_FOR_EACH_ELEMENT(i, n) {
    const float g = y.at<F>(i) > 0.0f ? dy[i] : 0.0f;
    dx[i] = Accumulate ? dx[i] + g : g;
  }
}

template <ValueFormat F>
__global__ void add16_kernel(ValuesIn a, ValuesIn b, ValuesOut y, std::size_t n) {
  CNN_FOR_EACH_ELEMENT(i, n) y.set<F>(i, a.at<F>(i) + b.at<F>(i));
}

}  // namespace

bool CudaBackend::require_values(const char* call, std::initializer_list<Tensor> values, std::size_t floats_from) {
  bool any16 = false;
  std::size_t index = 0;
  for (const Tensor& t : values) {
    if (t.packed16) {
      if (!products16())
        throw ConfigError(std::string(call) + ": a 16-bit value (Tensor::packed16) for a backend in " +
                          to_string(options_.precision));
      if (index >= floats_from)
        throw ConfigError(std::string(call) + ": argument " + std::to_string(index + 1) + " must be floats, not 16 bits");
      any16 = true;
    } else if (!t.data && t.shape.rank > 0 && t.elements() > 0) {
      throw ConfigError(std::string(call) + ": argument " + std::to_string(index + 1) + " " + t.shape.str() +
                        " has neither floats nor 16-bit values");
    }
    ++index;
  }
  return any16;
}

void CudaBackend::relu_forward16(const Tensor& x, Tensor y) {
  const std::size_t n = x.elements();
  if (product_format() == ValueFormat::bf16)
    relu_forward16_kernel<ValueFormat::bf16><<<blocks_for(n), 256, 0, compute_>>>(values_in(x), values_out(y), n);
  else
    relu_forward16_kernel<ValueFormat::fp16><<<blocks_for(n), 256, 0, compute_>>>(values_in(x), values_out(y), n);
  check_launch("relu_forward16_kernel");
}

void CudaBackend::relu_backward16(const Tensor& y, const Tensor& dy, Tensor dx, bool accumulate) {
  const std::size_t n = y.elements();
  const dim3 grid(blocks_for(n));
  if (product_format() == ValueFormat::bf16) {
    if (accumulate) relu_backward16_kernel<ValueFormat::bf16, true><<<grid, 256, 0, compute_>>>(values_in(y), dy.data, dx.data, n);
    else relu_backward16_kernel<ValueFormat::bf16, false><<<grid, 256, 0, compute_>>>(values_in(y), dy.data, dx.data, n);
  } else {
    if (accumulate) relu_backward16_kernel<ValueFormat::fp16, true><<<grid, 256, 0, compute_>>>(values_in(y), dy.data, dx.data, n);
    else relu_backward16_kernel<ValueFormat::fp16, false><<<grid, 256, 0, compute_>>>(values_in(y), dy.data, dx.data, n);
  }
  check_launch("relu_backward16_kernel");
}

void CudaBackend::add16(const Tensor& a, const Tensor& b, Tensor y) {
  const std::size_t n = a.elements();
  if (product_format() == ValueFormat::bf16)
    add16_kernel<ValueFormat::bf16><<<blocks_for(n), 256, 0, compute_>>>(values_in(a), values_in(b), values_out(y), n);
  else
    add16_kernel<ValueFormat::fp16><<<blocks_for(n), 256, 0, compute_>>>(values_in(a), values_in(b), values_out(y), n);
  check_launch("add16_kernel");
}

}  // namespace cnn::cuda
