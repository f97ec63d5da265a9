// Concatenation's channel copies and the element-wise product (same shapes, or one factor per
// sample and channel: the squeeze-and-excitation gate). One grid-striding thread per element; the
// gate's gradient sums each plane in one block, a fixed tree in shared memory (no atomics: the
// same bits every run).
#include <cstddef>
#include <string>

#include "backends/cuda/detail/check.hpp"
#include "backends/cuda/detail/cuda_backend_impl.hpp"
#include "backends/cuda/detail/grid_stride.cuh"
#include <cnnengine/base/error.hpp>

namespace cnn::cuda {
namespace {

constexpr int kThreads = 256;

// `count` elements in `samples` runs of `block`, from runs `from_stride` apart to runs `to_stride`
// apart.
template <bool Accumulate>
__global__ void copy_channels_kernel(const float* from, float* to, std::size_t block, std::size_t from_stride,
                                     std::size_t to_stride, std::size_t count) {
  CNN_FOR_EACH_ELEMENT(i, count) {
    const std::size_t n = i / block, offset = i % block;
    const float v = from[n * from_stride + offset];
    float& out = to[n * to_stride + offset];
    out = Accumulate ? out + v : v;
  }
}

// b's element for a's element i: the same one, or its plane's (plane elements apart).
__global__ void multiply_kernel_join(const float* a, const float* b, float* y, std::size_t n, std::size_t plane) {
  CNN_FOR_EACH_ELEMENT(i, n) y[i] = a[i] * b[i / plane];
}

// da = dy * b (b per plane when plane > 1), db = dy * a for same shapes; either may be null. da is
// written before db is read: they may be one buffer (x * x).
__global__ void multiply_backward_kernel(const float* a, const float* b, const float* dy, float* da,
                                         bool accumulate_a, float* db, bool accumulate_b, std::size_t n,
                                         std::size_t plane) {
  CNN_FOR_EACH_ELEMENT(i, n) {
    const float g = dy[i];
    if (da) {
      const float v = g * b[i / plane];
      da[i] = accumulate_a ? da[i] + v : v;
    }
    if (db && plane == 1) {
      const float v = g * a[i];
      db[i] = accumulate_b ? db[i] + v : v;
    }
  }
}

// db[p] (+)= sum over plane p of dy * a: one block per plane at a time, each thread a fixed
// stride of the plane, then a fixed tree.
__global__ void gate_gradient_kernel(const float* a, const float* dy, float* db, bool accumulate, std::size_t planes,
                                     std::size_t plane) {
  __shared__ float partial[kThreads];
  for (std::size_t p = blockIdx.x; p < planes; p += gridDim.x) {
    const float* x = a + p * plane;
    const float* g = dy + p * plane;
    float sum = 0.0f;
    for (std::size_t i = threadIdx.x; i < plane; i += kThreads) sum += g[i] * x[i];
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int half = kThreads / 2; half > 0; half /= 2) {
      if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
      __syncthreads();
    }
    if (threadIdx.x == 0) db[p] = accumulate ? db[p] + partial[0] : partial[0];
    __syncthreads();  // partial is reused by the next plane
  }
}

std::size_t plane_of(const Tensor& t) { return t.shape.rank >= 4 ? static_cast<std::size_t>(t.h()) * t.w() : 1; }

// The elements of a that share one element of b: 1 (same shapes) or H x W (b is [N, C, 1, 1], as
// the front checked).
std::size_t gate_plane(const Tensor& a, const Tensor& b) { return b.elements() == a.elements() ? 1 : plane_of(a); }

}  // namespace

void CudaBackend::do_copy_channels(const Tensor& from, int from_channel, Tensor to, int to_channel, int channels,
                                   bool accumulate) {
  activate();
  const std::size_t plane = plane_of(from);
  const std::size_t block = static_cast<std::size_t>(channels) * plane;
  const std::size_t count = block * static_cast<std::size_t>(from.n());
  if (count == 0) return;
  const float* src = from.data + static_cast<std::size_t>(from_channel) * plane;
  float* dst = to.data + static_cast<std::size_t>(to_channel) * plane;
  const std::size_t from_stride = static_cast<std::size_t>(from.c()) * plane;
  const std::size_t to_stride = static_cast<std::size_t>(to.c()) * plane;
  if (accumulate)
    copy_channels_kernel<true><<<blocks_for(count), kThreads, 0, compute_>>>(src, dst, block, from_stride, to_stride,
                                                                            count);
  else
    copy_channels_kernel<false><<<blocks_for(count), kThreads, 0, compute_>>>(src, dst, block, from_stride, to_stride,
                                                                             count);
  check_launch("copy_channels_kernel");
  touched(from, to);
}

void CudaBackend::do_multiply(const Tensor& a, const Tensor& b, Tensor y) {
  activate();
  const std::size_t plane = gate_plane(a, b);
  const std::size_t n = a.elements();
  if (n == 0) return;
  multiply_kernel_join<<<blocks_for(n), kThreads, 0, compute_>>>(a.data, b.data, y.data, n, plane);
  check_launch("multiply_kernel_join");
  touched(a, b, y);
}

void CudaBackend::do_multiply_backward(const Tensor& a, const Tensor& b, const Tensor& dy, Tensor da, bool accumulate_a,
                                       Tensor db, bool accumulate_b) {
  activate();
  const std::size_t plane = gate_plane(a, b);
  const std::size_t n = a.elements();
  if (n == 0) return;
  float* da_data = da.empty() ? nullptr : da.data;
  float* db_data = db.empty() ? nullptr : db.data;
  if (da_data || (db_data && plane == 1)) {
    multiply_backward_kernel<<<blocks_for(n), kThreads, 0, compute_>>>(a.data, b.data, dy.data, da_data, accumulate_a,
                                                                      db_data, accumulate_b, n, plane);
    check_launch("multiply_backward_kernel");
  }
  if (db_data && plane > 1) {
    const std::size_t planes = b.elements();
    const unsigned grid = static_cast<unsigned>(planes < 65535 ? planes : 65535);
    gate_gradient_kernel<<<grid, kThreads, 0, compute_>>>(a.data, dy.data, db_data, accumulate_b, planes, plane);
    check_launch("gate_gradient_kernel");
  }
  touched(a, b, dy);
  if (da_data) touched(da);
  if (db_data) touched(db);
}

}  // namespace cnn::cuda
