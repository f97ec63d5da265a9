// Batch normalisation from saved statistics: the output of a recomputation during backward
// (Backend::batchnorm_forward_saved). cuDNN's inference call would take a variance, not the
// saved 1 / sqrt(variance + epsilon), and change its rounding; this kernel uses the saved values
// as they are. One grid-striding thread per element.
#include <cstddef>
#include <string>

#include "backends/cuda/detail/check.hpp"
#include "backends/cuda/detail/cuda_backend_impl.hpp"
#include "backends/cuda/detail/grid_stride.cuh"
#include "base/error.hpp"

namespace cnn::cuda {
namespace {

__global__ void normalise_saved_kernel(const float* x, const float* gamma, const float* beta, const float* mean,
                                       const float* inv_std, float* y, std::size_t n, std::size_t channels,
                                       std::size_t plane) {
  CNN_FOR_EACH_ELEMENT(i, n) {
    const std::size_t ch = (i / plane) % channels;
    const float scale = gamma[ch] * inv_std[ch];
    y[i] = x[i] * scale + (beta[ch] - mean[ch] * scale);
  }
}

}  // namespace

void CudaBackend::batchnorm_forward_saved(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                          const Tensor& saved_mean, const Tensor& saved_inv_std, Tensor y) {
  activate();
  if (x.shape.rank < 2) throw ShapeError("batchnorm_forward_saved: input " + x.shape.str() + " has no channels");
  const auto channels = static_cast<std::size_t>(x.c());
  for (const Tensor* p : {&gamma, &beta, &saved_mean, &saved_inv_std})
    if (p->elements() != channels)
      throw ShapeError("batchnorm_forward_saved: a per-channel tensor " + p->shape.str() + " for input " +
                       x.shape.str() + " should hold " + std::to_string(channels) + " values");
  if (y.elements() != x.elements())
    throw ShapeError("batchnorm_forward_saved: output " + y.shape.str() + " for input " + x.shape.str());
  const std::size_t n = x.elements();
  if (n == 0) return;
  const std::size_t plane = static_cast<std::size_t>(x.h()) * static_cast<std::size_t>(x.w());
  normalise_saved_kernel<<<blocks_for(n), 256, 0, compute_>>>(x.data, gamma.data, beta.data, saved_mean.data,
                                                               saved_inv_std.data, y.data, n, channels, plane);
  check_launch("normalise_saved_kernel");
  touched(x, gamma, beta, saved_mean, saved_inv_std, y);
}

}  // namespace cnn::cuda
