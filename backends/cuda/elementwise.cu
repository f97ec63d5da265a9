// Element-wise kernels: fill, ReLU, dropout, add, copy-or-add. Memory-bound, one grid-striding
// thread per element.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "backends/cuda/detail/check.hpp"
#include "backends/cuda/detail/cuda_backend_impl.hpp"
#include "backends/cuda/detail/grid_stride.cuh"
#include <cnnengine/base/error.hpp>
#include <cnnengine/engine/core/backend.hpp>

namespace cnn::cuda {
namespace {

__global__ void fill_kernel(float* y, std::size_t n, float value) {
  CNN_FOR_EACH_ELEMENT(i, n) y[i] = value;
}

__global__ void relu_forward_kernel(const float* x, float* y, std::size_t n) {
  CNN_FOR_EACH_ELEMENT(i, n) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

template <bool Accumulate>
__global__ void relu_backward_kernel(const float* y, const float* dy, float* dx, std::size_t n) {
  CNN_FOR_EACH_ELEMENT(i, n) {
    const float g = y[i] > 0.0f ? dy[i] : 0.0f;
    dx[i] = Accumulate ? dx[i] + g : g;
  }
}

// The seed and the first sample come from device memory: a replayed graph reads the current ones.
__global__ void dropout_forward_kernel(const float* x, float* y, float* mask, std::size_t n, float p,
                                       float scale, const StepScalars* step, std::uint64_t layer,
                                       std::size_t sample_elements) {
  const std::uint64_t seed = splitmix64(step->seed ^ layer);
  const std::uint64_t first_index = step->first_sample * sample_elements;
  CNN_FOR_EACH_ELEMENT(i, n) {
    const float m = dropout_keep(seed, first_index + i, p) ? scale : 0.0f;
    mask[i] = m;
    y[i] = x[i] * m;
  }
}

template <bool Accumulate>
__global__ void multiply_kernel(const float* a, const float* b, float* y, std::size_t n) {
  CNN_FOR_EACH_ELEMENT(i, n) {
    const float v = a[i] * b[i];
    y[i] = Accumulate ? y[i] + v : v;
  }
}

__global__ void add_kernel(const float* a, const float* b, float* y, std::size_t n) {
  CNN_FOR_EACH_ELEMENT(i, n) y[i] = a[i] + b[i];
}

__global__ void accumulate_kernel(const float* src, float* dst, std::size_t n) {
  CNN_FOR_EACH_ELEMENT(i, n) dst[i] += src[i];
}

void same_size(const char* call, const Tensor& a, const Tensor& b) {
  if (a.elements() != b.elements()) {
    throw ShapeError(std::string(call) + ": " + a.shape.str() + " and " + b.shape.str() +
                     " differ in size");
  }
}

}  // namespace

void CudaBackend::do_fill(Tensor t, float value) {
  activate();
  const std::size_t n = t.elements();
  if (n == 0) return;
  if (value == 0.0f && !std::signbit(value)) {
    CNN_CHECK(cudaMemsetAsync(t.data, 0, t.bytes(), compute_));
  } else {
    fill_kernel<<<blocks_for(n), 256, 0, compute_>>>(t.data, n, value);
    check_launch("fill_kernel");
  }
  touched(t);
}

void CudaBackend::do_relu_forward(const Tensor& x, Tensor y) {
  activate();
  same_size("relu_forward", x, y);
  const std::size_t n = x.elements();
  if (n == 0) return;
  if (require_values("relu_forward", {x, y})) {
    relu_forward16(x, y);
  } else {
    relu_forward_kernel<<<blocks_for(n), 256, 0, compute_>>>(x.data, y.data, n);
    check_launch("relu_forward_kernel");
  }
  touched(x, packed_range(x), y, packed_range(y));
}

void CudaBackend::do_relu_backward(const Tensor& y, const Tensor& dy, Tensor dx, bool accumulate) {
  activate();
  same_size("relu_backward", y, dy);
  same_size("relu_backward", y, dx);
  const std::size_t n = y.elements();
  if (n == 0) return;
  if (require_values("relu_backward", {y, dy, dx}, 1)) {
    relu_backward16(y, dy, dx, accumulate);
  } else {
    if (accumulate) relu_backward_kernel<true><<<blocks_for(n), 256, 0, compute_>>>(y.data, dy.data, dx.data, n);
    else relu_backward_kernel<false><<<blocks_for(n), 256, 0, compute_>>>(y.data, dy.data, dx.data, n);
    check_launch("relu_backward_kernel");
  }
  touched(y, packed_range(y), dy, dx);
}

void CudaBackend::do_dropout_forward(const Tensor& x, Tensor y, Tensor mask, float p, const StepScalars* step,
                                     std::uint64_t layer) {
  activate();
  if (!(p >= 0.0f && p <= 1.0f)) throw ConfigError("dropout_forward: p = " + std::to_string(p) + " is outside [0, 1]");
  same_size("dropout_forward", x, y);
  same_size("dropout_forward", x, mask);
  const std::size_t n = x.elements();
  if (n == 0) return;
  const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  dropout_forward_kernel<<<blocks_for(n), 256, 0, compute_>>>(x.data, y.data, mask.data, n, p, scale, step,
                                                                     layer, x.sample_elements());
  check_launch("dropout_forward_kernel");
  touched(x, y, mask, scalars_range(step));
}

void CudaBackend::do_dropout_backward(const Tensor& dy, const Tensor& mask, Tensor dx, bool accumulate) {
  activate();
  same_size("dropout_backward", dy, mask);
  same_size("dropout_backward", dy, dx);
  const std::size_t n = dy.elements();
  if (n == 0) return;
  if (accumulate) {
    multiply_kernel<true><<<blocks_for(n), 256, 0, compute_>>>(dy.data, mask.data, dx.data, n);
  } else {
    multiply_kernel<false><<<blocks_for(n), 256, 0, compute_>>>(dy.data, mask.data, dx.data, n);
  }
  check_launch("multiply_kernel");
  touched(dy, mask, dx);
}

void CudaBackend::do_add(const Tensor& a, const Tensor& b, Tensor y) {
  activate();
  same_size("add", a, b);
  same_size("add", a, y);
  const std::size_t n = a.elements();
  if (n == 0) return;
  if (require_values("add", {a, b, y})) {
    add16(a, b, y);
  } else {
    add_kernel<<<blocks_for(n), 256, 0, compute_>>>(a.data, b.data, y.data, n);
    check_launch("add_kernel");
  }
  touched(a, packed_range(a), b, packed_range(b), y, packed_range(y));
}

void CudaBackend::do_copy_or_add(const Tensor& src, Tensor dst, bool accumulate) {
  activate();
  same_size("copy_or_add", src, dst);
  const std::size_t n = src.elements();
  if (n == 0) return;
  if (accumulate) {
    accumulate_kernel<<<blocks_for(n), 256, 0, compute_>>>(src.data, dst.data, n);
    check_launch("accumulate_kernel");
  } else if (src.data != dst.data) {
    CNN_CHECK(cudaMemcpyAsync(dst.data, src.data, src.bytes(), cudaMemcpyDeviceToDevice, compute_));
  }
  touched(src, dst);
}

}  // namespace cnn::cuda
