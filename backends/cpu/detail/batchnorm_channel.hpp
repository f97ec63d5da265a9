#pragma once
// One channel of a batch normalisation on the CPU, shared by training's forward, its recomputation
// from the saved statistics and synchronised BatchNorm, so that all three round alike.
#include <cstddef>

#include <cnnengine/engine/core/tensor.hpp>

namespace cnn::cpu {

// Each pass below runs on the host's vector instructions and gives the same bits on every one
// (batchnorm_channel.inl), wherever it is called.

// y = x * scale + shift with scale = gamma * inv_std and shift = beta - mean * scale, for channel
// `ch` of every sample; with `relu`, max(that, 0) (relu_forward's bits); with a `residual` too,
// max(that + residual, 0) (add's, then relu_forward's bits).
void normalise_channel(const Tensor& x, float gamma, float beta, float mean, float inv_std, std::size_t ch, Tensor& y,
                       bool relu, const Tensor* residual = nullptr);

// Channel `ch`'s mean and biased variance over its `count` values: the mean first, then the
// squares about it, each summed in lanes (Note [Channel sums in lanes]).
struct ChannelMoments {
  double mean, var;
};
ChannelMoments channel_moments(const Tensor& x, std::size_t ch, double count);

// Channel `ch` of a training forward once its batch mean and (biased) variance over `count`
// values are known: y normalised, the mean and 1 / sqrt(var + epsilon) saved for backward, the
// running statistics moved by `momentum` (the variance unbiased); with `relu`, y = max(y, 0), and
// with a `residual` too, y = max(y + residual, 0).
struct BatchNormChannel {
  const Tensor &x, &gamma, &beta;
  Tensor &y, &running_mean, &running_var, &saved_mean, &saved_inv_std;
  float momentum, epsilon;
  bool relu = false;
  const Tensor* residual = nullptr;
};
void finish_channel(const BatchNormChannel& b, std::size_t ch, double mean, double var, double count);

// Channel `ch` of backward's input gradient from the channel's sums of dy and dy * xhat over
// `count` values (one rank's, or every rank's): written to dx, or added to it. With a ReLU after
// the BatchNorm, dy is the ReLU's output gradient and `relu_output` its output: dy counts where
// the output is positive (relu_backward's values, so the unfused bits). With a residual added
// before that ReLU, that masked dy is also the residual's gradient: written to
// `residual_gradient`, or added to it (copy_or_add's bits), as each value is read.
struct BatchNormGradient {
  const Tensor &x, &dy, &gamma, &saved_mean, &saved_inv_std;
  Tensor& dx;
  bool accumulate;
  const Tensor* relu_output = nullptr;
  Tensor* residual_gradient = nullptr;  // only with relu_output
  bool accumulate_residual = false;
};
void input_gradient(const BatchNormGradient& g, std::size_t ch, double sum_dy, double sum_dy_xhat, double count);

// Channel `ch`'s sums of dy and of dy * xhat (xhat from `mean` and `inv_std`), in one pass in
// lanes: what backward needs, one rank's or every rank's.
struct ChannelGradientSums {
  double dy, dy_xhat;
};
ChannelGradientSums gradient_sums(const Tensor& x, const Tensor& dy, std::size_t ch, double mean, double inv_std,
                                  const Tensor* relu_output);

// The loops below are always inlined, so that each region's passes (batchnorm_channel.inl) run
// them, and the terms they are given, in the region's instructions.

// fn(value index) for every value of channel `ch`: each sample's plane in turn.
template <class Fn>
[[gnu::always_inline]] inline void for_each_in_channel(const Tensor& x, std::size_t ch, Fn&& fn) {
  const int n = x.n(), c = x.c();
  const std::size_t hw = static_cast<std::size_t>(x.h()) * x.w();
  for (int i = 0; i < n; ++i) {
    const std::size_t offset = (static_cast<std::size_t>(i) * c + ch) * hw;
    for (std::size_t k = 0; k < hw; ++k) fn(offset + k);
  }
}

// Note [Channel sums in lanes]
// A channel's sums are in double, as PyTorch's CPU batch norm keeps them. One running double is a
// chain of dependent additions, one value per addition's latency: that made BatchNorm a quarter
// of small-bn's CPU step. So each sum runs in kSumLanes doubles, value k of a plane into lane
// k % kSumLanes (the compiler turns the lanes into one vector register), and the lanes are added in a
// fixed tree at the end: the same order whatever the threads, so the same bits every run.
inline constexpr int kSumLanes = 8;

// fn(value index, lane) for every value of channel `ch`, value k of each plane given lane
// k % kSumLanes: each lane's values in a fixed order. Each of the `ahead` arrays (indexed as x is)
// is fetched one plane ahead, a cache line every 16 values: a channel's planes lie a whole image
// apart, and the hardware's prefetcher starts afresh at each one (BatchNorm and ReLU's calls ran
// 1.04x to 1.12x faster so, layer_kernels' batchnorm_relu cases on Zen 4).
template <class Fn, class... Streams>
[[gnu::always_inline]] inline void for_each_in_channel_lanes(const Tensor& x, std::size_t ch, Fn&& fn,
                                                             const Streams*... ahead) {
  const int n = x.n(), c = x.c();
  const std::size_t hw = static_cast<std::size_t>(x.h()) * x.w();
  const std::size_t plane_step = static_cast<std::size_t>(c) * hw;
  for (int i = 0; i < n; ++i) {
    const std::size_t offset = (static_cast<std::size_t>(i) * c + ch) * hw;
    [[maybe_unused]] const std::size_t next = i + 1 < n ? offset + plane_step : offset;
    std::size_t k = 0;
    for (; k + 2 * kSumLanes <= hw; k += 2 * kSumLanes) {
      (__builtin_prefetch(ahead + next + k), ...);
      for (int l = 0; l < kSumLanes; ++l) fn(offset + k + l, l);
      for (int l = 0; l < kSumLanes; ++l) fn(offset + k + kSumLanes + l, l);
    }
    for (; k + kSumLanes <= hw; k += kSumLanes)
      for (int l = 0; l < kSumLanes; ++l) fn(offset + k + l, l);
    for (; k < hw; ++k) fn(offset + k, static_cast<int>(k % kSumLanes));
  }
}

// The lanes added in a fixed tree.
inline double lanes_total(const double (&l)[kSumLanes]) {
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

// The sum of term(value index) over channel `ch`, in double, in lanes.
template <class Term, class... Streams>
[[gnu::always_inline]] inline double channel_sum(const Tensor& x, std::size_t ch, Term&& term,
                                                 const Streams*... ahead) {
  double lanes[kSumLanes] = {};
  for_each_in_channel_lanes(
      x, ch, [&](std::size_t i, int l) __attribute__((always_inline)) { lanes[l] += term(i); }, ahead...);
  return lanes_total(lanes);
}

// The sums of term0(i) and term1(i) over channel `ch`, in one pass: each the bits channel_sum gives.
template <class Term0, class Term1, class... Streams>
[[gnu::always_inline]] inline void channel_sums(const Tensor& x, std::size_t ch, Term0&& term0, Term1&& term1,
                                                double& sum0, double& sum1, const Streams*... ahead) {
  double lanes0[kSumLanes] = {}, lanes1[kSumLanes] = {};
  for_each_in_channel_lanes(
      x, ch,
      [&](std::size_t i, int l) __attribute__((always_inline)) {
        lanes0[l] += term0(i);
        lanes1[l] += term1(i);
      },
      ahead...);
  sum0 = lanes_total(lanes0);
  sum1 = lanes_total(lanes1);
}

}  // namespace cnn::cpu
