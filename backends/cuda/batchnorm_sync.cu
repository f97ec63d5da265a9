// Synchronised BatchNorm on CUDA (Backend::batchnorm_channel_sums and the calls after it): the
// per-channel sums are one block per channel reducing in double, as the CPU backend sums; the
// forward normalises through batchnorm_forward_saved, so that a recomputation rounds alike. The
// input x may come in 16 bits (Tensor::packed16), as a step on a 16-bit plan stores it.
#include <cstddef>
#include <initializer_list>
#include <string>

#include "backends/cuda/detail/block_sums.cuh"
#include "backends/cuda/detail/check.hpp"
#include "backends/cuda/detail/cuda_backend_impl.hpp"
#include "backends/cuda/detail/grid_stride.cuh"
#include "backends/cuda/detail/values16.cuh"
#include <cnnengine/base/error.hpp>

namespace cnn::cuda {
namespace {

constexpr int kReduceThreads = 256;

// Where value k of channel ch sits: samples of `channels` planes of `plane` values each.
struct ChannelLayout {
  std::size_t samples, channels, plane;
  __device__ std::size_t at(std::size_t ch, std::size_t k) const {
    return ((k / plane) * channels + ch) * plane + k % plane;
  }
  __device__ std::size_t values() const { return samples * plane; }
};

// Block `ch` sums term(i) over the channel's values into out[ch] (and term2 into out2[ch] when
// out2 is not null), in double.
template <class Term, class Term2>
__global__ void channel_sums_kernel(ChannelLayout layout, Term term, Term2 term2, float* out, float* out2) {
  const std::size_t ch = blockIdx.x;
  double sum = 0, sum2 = 0;
  for (std::size_t k = threadIdx.x; k < layout.values(); k += blockDim.x) {
    const std::size_t i = layout.at(ch, k);
    sum += term(i, ch);
    if (out2) sum2 += term2(i, ch);
  }
  block_sums<kReduceThreads>(sum, sum2);
  if (threadIdx.x == 0) {
    out[ch] = static_cast<float>(sum);
    if (out2) out2[ch] = static_cast<float>(sum2);
  }
}

template <ValueFormat F>
struct Value {
  ValuesIn x;
  __device__ double operator()(std::size_t i, std::size_t) const { return x.at<F>(i); }
};
template <ValueFormat F>
struct CenteredSquare {
  ValuesIn x;
  const float* sums;
  double count;
  __device__ double operator()(std::size_t i, std::size_t ch) const {
    const double d = x.at<F>(i) - sums[ch] / count;
    return d * d;
  }
};
struct OutputGradient {
  const float* dy;
  __device__ double operator()(std::size_t i, std::size_t) const { return dy[i]; }
};
template <ValueFormat F>
struct GradientTimesNormalised {
  ValuesIn x;
  const float *dy, *mean, *inv_std;
  __device__ double operator()(std::size_t i, std::size_t ch) const {
    return static_cast<double>(dy[i]) * (x.at<F>(i) - static_cast<double>(mean[ch])) * inv_std[ch];
  }
};

// From every rank's sums: the mean and 1 / sqrt(var + epsilon) in place of them, and the running
// statistics moved (the variance unbiased).
__global__ void statistics_from_sums_kernel(float* mean, float* inv_std, float* running_mean, float* running_var,
                                            std::size_t channels, double count, float momentum, float epsilon) {
  CNN_FOR_EACH_ELEMENT(ch, channels) {
    const double m = mean[ch] / count, var = inv_std[ch] / count;
    mean[ch] = static_cast<float>(m);
    inv_std[ch] = static_cast<float>(1.0 / sqrt(var + epsilon));
    const double unbiased = count > 1 ? var * count / (count - 1) : var;
    running_mean[ch] = static_cast<float>((1.0 - momentum) * running_mean[ch] + momentum * m);
    running_var[ch] = static_cast<float>((1.0 - momentum) * running_var[ch] + momentum * unbiased);
  }
}

template <ValueFormat F>
__global__ void backward_from_sums_kernel(ValuesIn x, const float* dy, const float* gamma, const float* mean,
                                          const float* inv_std, const float* sums, double count, float* dx,
                                          std::size_t n, std::size_t channels, std::size_t plane, bool accumulate) {
  CNN_FOR_EACH_ELEMENT(i, n) {
    const std::size_t ch = (i / plane) % channels;
    const double is = inv_std[ch];
    const double xhat = (x.at<F>(i) - static_cast<double>(mean[ch])) * is;
    const double scale = gamma[ch] * is / count;
    const float g = static_cast<float>(scale * (count * dy[i] - sums[ch] - xhat * sums[channels + ch]));
    dx[i] = accumulate ? dx[i] + g : g;
  }
}

void check_channels(const char* call, const Tensor& x, std::initializer_list<const Tensor*> per_channel,
                    std::size_t per) {
  if (x.shape.rank < 2) throw ShapeError(std::string(call) + ": input " + x.shape.str() + " has no channels");
  for (const Tensor* p : per_channel)
    if (p->elements() < per * static_cast<std::size_t>(x.c()))
      throw ShapeError(std::string(call) + ": a per-channel tensor " + p->shape.str() + " for input " + x.shape.str());
}

ChannelLayout layout_of(const Tensor& x) {
  return {static_cast<std::size_t>(x.n()), static_cast<std::size_t>(x.c()),
          static_cast<std::size_t>(x.h()) * static_cast<std::size_t>(x.w())};
}

}  // namespace

void CudaBackend::do_batchnorm_channel_sums(const Tensor& x, Tensor sums) {
  activate();
  check_channels("batchnorm_channel_sums", x, {&sums}, 1);
  require_values("batchnorm_channel_sums", {x, sums}, 1);
  if (x.c() == 0) return;  // no block to launch
  with_format(product_format(), [&](auto f) {
    const Value<decltype(f)::value> term{values_in(x)};
    channel_sums_kernel<<<x.c(), kReduceThreads, 0, compute_>>>(layout_of(x), term, term, sums.data, nullptr);
  });
  check_launch("channel_sums_kernel");
  touched(x, packed_range(x), sums);
}

void CudaBackend::do_batchnorm_centered_squares(const Tensor& x, const Tensor& sums, double count, Tensor out) {
  activate();
  check_channels("batchnorm_centered_squares", x, {&sums, &out}, 1);
  require_values("batchnorm_centered_squares", {x, sums, out}, 1);
  if (x.c() == 0) return;  // no block to launch
  with_format(product_format(), [&](auto f) {
    const CenteredSquare<decltype(f)::value> term{values_in(x), sums.data, count};
    channel_sums_kernel<<<x.c(), kReduceThreads, 0, compute_>>>(layout_of(x), term, term, out.data, nullptr);
  });
  check_launch("channel_sums_kernel");
  touched(x, packed_range(x), sums, out);
}

void CudaBackend::do_batchnorm_forward_from_sums(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y,
                                                 Tensor running_mean, Tensor running_var, float momentum, float epsilon,
                                                 double count, Tensor saved_mean, Tensor saved_inv_std) {
  activate();
  check_channels("batchnorm_forward_from_sums", x, {&running_mean, &running_var}, 1);
  const auto channels = static_cast<std::size_t>(x.c());
  // What batchnorm_forward_saved refuses is refused before the statistics change in place.
  check_saved_statistics_call("batchnorm_forward_from_sums", x, gamma, beta, saved_mean, saved_inv_std, y);
  if (channels == 0) return;
  statistics_from_sums_kernel<<<blocks_for(channels), 256, 0, compute_>>>(
      saved_mean.data, saved_inv_std.data, running_mean.data, running_var.data, channels, count, momentum, epsilon);
  check_launch("statistics_from_sums_kernel");
  touched(saved_mean, saved_inv_std, running_mean, running_var);
  batchnorm_forward_saved(x, gamma, beta, saved_mean, saved_inv_std, y);
}

void CudaBackend::do_batchnorm_backward_sums(const Tensor& x, const Tensor& dy, const Tensor& saved_mean,
                                             const Tensor& saved_inv_std, Tensor sums) {
  activate();
  check_channels("batchnorm_backward_sums", x, {&saved_mean, &saved_inv_std}, 1);
  check_channels("batchnorm_backward_sums", x, {&sums}, 2);
  require_values("batchnorm_backward_sums", {x, dy, sums}, 1);
  if (x.c() == 0) return;  // no block to launch
  with_format(product_format(), [&](auto f) {
    const GradientTimesNormalised<decltype(f)::value> term{values_in(x), dy.data, saved_mean.data, saved_inv_std.data};
    channel_sums_kernel<<<x.c(), kReduceThreads, 0, compute_>>>(layout_of(x), OutputGradient{dy.data}, term,
                                                                 sums.data, sums.data + x.c());
  });
  check_launch("channel_sums_kernel");
  touched(x, packed_range(x), dy, saved_mean, saved_inv_std, sums);
}

void CudaBackend::do_batchnorm_backward_from_sums(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                                  const Tensor& saved_mean, const Tensor& saved_inv_std,
                                                  const Tensor& sums, double count, Tensor dx, bool accumulate) {
  activate();
  check_channels("batchnorm_backward_from_sums", x, {&gamma, &saved_mean, &saved_inv_std}, 1);
  check_channels("batchnorm_backward_from_sums", x, {&sums}, 2);
  require_values("batchnorm_backward_from_sums", {x, dy, dx}, 1);
  const std::size_t n = x.elements();
  if (n == 0) return;
  const auto channels = static_cast<std::size_t>(x.c());
  const std::size_t plane = static_cast<std::size_t>(x.h()) * static_cast<std::size_t>(x.w());
  with_format(product_format(), [&](auto f) {
    backward_from_sums_kernel<decltype(f)::value><<<blocks_for(n), 256, 0, compute_>>>(
        values_in(x), dy.data, gamma.data, saved_mean.data, saved_inv_std.data, sums.data, count, dx.data, n,
        channels, plane, accumulate);
  });
  check_launch("backward_from_sums_kernel");
  touched(x, packed_range(x), dy, gamma, saved_mean, saved_inv_std, sums, dx);
}

}  // namespace cnn::cuda
