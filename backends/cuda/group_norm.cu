// Group normalisation on CUDA (Backend::group_norm_forward and group_norm_backward). One block per
// (sample, group), whose values are contiguous: the mean, then the centred squares, each summed in
// double by the block's threads and reduced in a fixed tree, then y. Backward writes dx the same way,
// then dgamma and dbeta in a second kernel that owns each channel (a block, reducing in a fixed
// tree) or element (a thread, over the samples in order): no atomics, the same bits every run.
#include <cstddef>
#include <string>

#include "backends/cuda/detail/block_sums.cuh"
#include "backends/cuda/detail/check.hpp"
#include "backends/cuda/detail/cuda_backend_impl.hpp"
#include "backends/cuda/detail/grid_stride.cuh"
#include <cnnengine/base/error.hpp>

namespace cnn::cuda {
namespace {

constexpr int kThreads = 256;

struct GroupGeometry {
  std::size_t groups, group_channels, plane;
  bool per_element;
  __device__ std::size_t values() const { return group_channels * plane; }  // per (sample, group)
  // Where the affine of value k of (sample, group) `item` is: its channel, or its place in the sample.
  __device__ std::size_t affine(std::size_t item, std::size_t k) const {
    const std::size_t group = item % groups;
    return per_element ? group * values() + k : group * group_channels + k / plane;
  }
};

__global__ void forward_kernel(const float* x, const float* gamma, const float* beta, float* y, float* saved_mean,
                               float* saved_inv_std, GroupGeometry g, float epsilon) {
  const std::size_t item = blockIdx.x, m = g.values();
  const float* in = x + item * m;
  float* out = y + item * m;
  double sum = 0, unused = 0;
  for (std::size_t k = threadIdx.x; k < m; k += kThreads) sum += in[k];
  block_sums<kThreads>(sum, unused);
  const double mean = sum / static_cast<double>(m);
  double squares = 0;
  for (std::size_t k = threadIdx.x; k < m; k += kThreads) {
    const double d = in[k] - mean;
    squares += d * d;
  }
  block_sums<kThreads>(squares, unused);
  // y and backward both use the statistics as saved (floats), as the CPU backend does.
  const float mean_f = static_cast<float>(mean);
  const float inv_std = static_cast<float>(1.0 / sqrt(squares / static_cast<double>(m) + epsilon));
  if (threadIdx.x == 0) {
    if (saved_mean) saved_mean[item] = mean_f;
    if (saved_inv_std) saved_inv_std[item] = inv_std;
  }
  for (std::size_t k = threadIdx.x; k < m; k += kThreads) {
    const std::size_t a = g.affine(item, k);
    // Centred, as on the CPU: a group far from zero loses no precision to cancellation.
    out[k] = g.per_element ? (in[k] - mean_f) * inv_std * gamma[a] + beta[a]
                           : (in[k] - mean_f) * (gamma[a] * inv_std) + beta[a];
  }
}

// dx = inv_std / M x (M dy gamma - sum(dy gamma) - xhat sum(dy gamma xhat)) over the group's M values.
template <bool Accumulate>
__global__ void input_gradient_kernel(const float* x, const float* dy, const float* gamma, const float* saved_mean,
                                      const float* saved_inv_std, float* dx, GroupGeometry g) {
  const std::size_t item = blockIdx.x, m = g.values(), at = item * m;
  const double mean = saved_mean[item], inv_std = saved_inv_std[item];
  double sum_dy_gamma = 0, sum_dy_gamma_centred = 0;
  for (std::size_t k = threadIdx.x; k < m; k += kThreads) {
    const double v = static_cast<double>(dy[at + k]) * gamma[g.affine(item, k)];
    sum_dy_gamma += v;
    sum_dy_gamma_centred += v * (x[at + k] - mean);
  }
  block_sums<kThreads>(sum_dy_gamma, sum_dy_gamma_centred);
  const double count = static_cast<double>(m);
  const double a = inv_std * inv_std * inv_std * sum_dy_gamma_centred / count;
  const float b = static_cast<float>(-a);
  const float c = static_cast<float>(-inv_std * sum_dy_gamma / count);
  const float scale = static_cast<float>(inv_std), mean_f = saved_mean[item];
  for (std::size_t k = threadIdx.x; k < m; k += kThreads) {
    const float v = scale * gamma[g.affine(item, k)] * dy[at + k] + b * (x[at + k] - mean_f) + c;
    dx[at + k] = Accumulate ? dx[at + k] + v : v;
  }
}

// Block `ch` owns channel ch: its values over every sample, reduced in a fixed tree.
__global__ void channel_gradients_kernel(const float* x, const float* dy, const float* saved_mean,
                                         const float* saved_inv_std, float* dgamma, float* dbeta, GroupGeometry g,
                                         std::size_t samples, std::size_t channels) {
  const std::size_t ch = blockIdx.x, group = ch / g.group_channels;
  double sum_g = 0, sum_b = 0;
  for (std::size_t k = threadIdx.x; k < samples * g.plane; k += kThreads) {
    const std::size_t s = k / g.plane, item = s * g.groups + group, i = (s * channels + ch) * g.plane + k % g.plane;
    const double d = dy[i];
    sum_g += d * (x[i] - static_cast<double>(saved_mean[item])) * saved_inv_std[item];
    sum_b += d;
  }
  block_sums<kThreads>(sum_g, sum_b);
  if (threadIdx.x == 0) {
    if (dgamma) dgamma[ch] += static_cast<float>(sum_g);
    if (dbeta) dbeta[ch] += static_cast<float>(sum_b);
  }
}

// A thread owns element i of a sample: its sums over the samples in order.
__global__ void element_gradients_kernel(const float* x, const float* dy, const float* saved_mean,
                                         const float* saved_inv_std, float* dgamma, float* dbeta, std::size_t samples,
                                         std::size_t per_sample) {
  CNN_FOR_EACH_ELEMENT(i, per_sample) {
    double sum_g = 0, sum_b = 0;
    for (std::size_t s = 0; s < samples; ++s) {
      const double d = dy[s * per_sample + i];
      sum_g += d * ((x[s * per_sample + i] - static_cast<double>(saved_mean[s])) * saved_inv_std[s]);
      sum_b += d;
    }
    if (dgamma) dgamma[i] += static_cast<float>(sum_g);
    if (dbeta) dbeta[i] += static_cast<float>(sum_b);
  }
}

void check(const char* call, const GroupNormDesc& d, const Tensor& x, const Tensor& gamma, const Tensor& other) {
  const int c = x.c();
  const std::size_t affine = d.per_element_affine ? x.sample_elements() : static_cast<std::size_t>(c);
  if (x.shape.rank < 2 || d.groups <= 0 || c % d.groups != 0 || gamma.elements() != affine ||
      other.elements() != x.elements())
    throw ShapeError(std::string(call) + ": " + std::to_string(d.groups) + " groups of input " + x.shape.str() +
                     " with gamma " + gamma.shape.str() + " and " + other.shape.str());
}

GroupGeometry geometry(const GroupNormDesc& d, const Tensor& x) {
  const auto channels = static_cast<std::size_t>(x.c()), groups = static_cast<std::size_t>(d.groups);
  return {groups, channels / groups, x.sample_elements() / channels, d.per_element_affine};
}

}  // namespace

void CudaBackend::do_group_norm_forward(const GroupNormDesc& d, const Tensor& x, const Tensor& gamma,
                                        const Tensor& beta, Tensor y, Tensor saved_mean, Tensor saved_inv_std) {
  activate();
  check("group_norm_forward", d, x, gamma, y);
  if (beta.elements() != gamma.elements())
    throw ShapeError("group_norm_forward: beta " + beta.shape.str() + " for gamma " + gamma.shape.str());
  const std::size_t items = static_cast<std::size_t>(x.n()) * static_cast<std::size_t>(d.groups);
  if (items == 0 || x.elements() == 0) return;
  forward_kernel<<<static_cast<unsigned>(items), kThreads, 0, compute_>>>(
      x.data, gamma.data, beta.data, y.data, saved_mean.data, saved_inv_std.data, geometry(d, x), d.epsilon);
  check_launch("group_norm forward_kernel");
  touched(x, gamma, beta, y, saved_mean, saved_inv_std);
}

std::size_t CudaBackend::do_group_norm_workspace_bytes(const GroupNormDesc& /*desc*/, const Shape& /*x*/) {
  return 0;
}

void CudaBackend::do_group_norm_backward(const GroupNormDesc& d, const Tensor& x, const Tensor& dy,
                                         const Tensor& gamma, const Tensor& saved_mean, const Tensor& saved_inv_std,
                                         Tensor dx, bool accumulate, Tensor dgamma, Tensor dbeta, Workspace) {
  activate();
  check("group_norm_backward", d, x, gamma, dy);
  if (!dx.empty() && dx.elements() != x.elements())
    throw ShapeError("group_norm_backward: input gradient " + dx.shape.str() + " for input " + x.shape.str());
  const GroupGeometry g = geometry(d, x);
  const std::size_t samples = static_cast<std::size_t>(x.n()), items = samples * g.groups;
  if (items == 0 || x.elements() == 0) return;
  if (!dx.empty()) {
    if (accumulate)
      input_gradient_kernel<true><<<static_cast<unsigned>(items), kThreads, 0, compute_>>>(
          x.data, dy.data, gamma.data, saved_mean.data, saved_inv_std.data, dx.data, g);
    else
      input_gradient_kernel<false><<<static_cast<unsigned>(items), kThreads, 0, compute_>>>(
          x.data, dy.data, gamma.data, saved_mean.data, saved_inv_std.data, dx.data, g);
    check_launch("group_norm input_gradient_kernel");
  }
  if (!dgamma.empty() || !dbeta.empty()) {
    if (d.per_element_affine) {
      const std::size_t per_sample = x.sample_elements();
      element_gradients_kernel<<<blocks_for(per_sample), 256, 0, compute_>>>(
          x.data, dy.data, saved_mean.data, saved_inv_std.data, dgamma.data, dbeta.data, samples, per_sample);
      check_launch("group_norm element_gradients_kernel");
    } else {
      const auto channels = static_cast<std::size_t>(x.c());
      channel_gradients_kernel<<<static_cast<unsigned>(channels), kThreads, 0, compute_>>>(
          x.data, dy.data, saved_mean.data, saved_inv_std.data, dgamma.data, dbeta.data, g, samples, channels);
      check_launch("group_norm channel_gradients_kernel");
    }
  }
  touched(x, dy, gamma, saved_mean, saved_inv_std, dx, dgamma, dbeta);
}

}  // namespace cnn::cuda
