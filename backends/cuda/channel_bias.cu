// A bias per channel (a transposed convolution's, and a convolution's over its 16-bit output):
// added to [N, C, H, W], NCHW or channels last, one grid-striding thread per element, to the
// floats or, where the output has them (Tensor::packed16), to its 16-bit values, widened, added
// and rounded; its gradient one
// block per channel, each thread summing a fixed set of elements in order and the block adding
// those sums in a fixed tree: the same bits every run, no atomics.
#include <cstddef>

#include "backends/cuda/detail/check.hpp"
#include "backends/cuda/detail/cuda_backend_impl.hpp"
#include "backends/cuda/detail/grid_stride.cuh"
#include "backends/cuda/detail/values16.cuh"
#include <cnnengine/base/error.hpp>

namespace cnn::cuda {
namespace {

constexpr int kThreads = 256;

template <ValueFormat F>
__global__ void add_channel_bias_kernel(const float* bias, ValuesIn y_in, ValuesOut y, std::size_t n,
                                        std::size_t plane, int channels) {
  CNN_FOR_EACH_ELEMENT(i, n) y.set<F>(i, y_in.at<F>(i) + bias[(i / plane) % static_cast<std::size_t>(channels)]);
}

// Block c sums channel c over every image and pixel: NCHW's planes, or channels last, value c of
// every pixel.
template <bool kChannelsLast>
__global__ void channel_bias_backward_kernel(const float* dy, float* dbias, int images, std::size_t plane,
                                             int channels) {
  __shared__ float partial[kThreads];
  const int c = blockIdx.x;
  float sum = 0.0f;
  if constexpr (kChannelsLast) {
    const std::size_t pixels = static_cast<std::size_t>(images) * plane;
    for (std::size_t j = threadIdx.x; j < pixels; j += kThreads) sum += dy[j * channels + c];
  } else {
    for (int n = 0; n < images; ++n) {
      const float* p = dy + (static_cast<std::size_t>(n) * channels + c) * plane;
      for (std::size_t j = threadIdx.x; j < plane; j += kThreads) sum += p[j];
    }
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) dbias[c] += partial[0];
}

void check_bias(const char* call, const Tensor& bias, const Tensor& t) {
  if (bias.elements() != static_cast<std::size_t>(t.c()))
    throw ShapeError(std::string(call) + ": a bias of " + bias.shape.str() + " for " + t.shape.str());
}

}  // namespace

void CudaBackend::do_add_channel_bias(const Tensor& bias, Tensor y) {
  activate();
  check_bias("add_channel_bias", bias, y);
  require_values("add_channel_bias", {y});
  const std::size_t n = y.elements();
  if (n == 0) return;
  // Channels last, the channel is an element's index modulo C: a plane of 1.
  const std::size_t plane =
      y.shape.channels_last ? 1 : static_cast<std::size_t>(y.h()) * static_cast<std::size_t>(y.w());
  with_format(product_format(), [&](auto f) {
    add_channel_bias_kernel<decltype(f)::value><<<blocks_for(n), kThreads, 0, compute_>>>(
        bias.data, values_in(y), values_out(y), n, plane, y.c());
  });
  check_launch("add_channel_bias_kernel");
  touched(bias, y, packed_range(y));
}

void CudaBackend::do_channel_bias_backward(const Tensor& dy, Tensor dbias) {
  activate();
  check_bias("channel_bias_backward", dbias, dy);
  if (dy.elements() == 0) return;
  const std::size_t plane = static_cast<std::size_t>(dy.h()) * static_cast<std::size_t>(dy.w());
  if (dy.shape.channels_last)
    channel_bias_backward_kernel<true>
        <<<static_cast<unsigned>(dy.c()), kThreads, 0, compute_>>>(dy.data, dbias.data, dy.n(), plane, dy.c());
  else
    channel_bias_backward_kernel<false>
        <<<static_cast<unsigned>(dy.c()), kThreads, 0, compute_>>>(dy.data, dbias.data, dy.n(), plane, dy.c());
  check_launch("channel_bias_backward_kernel");
  touched(dy, dbias);
}

}  // namespace cnn::cuda
