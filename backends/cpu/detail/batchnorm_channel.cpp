#include "backends/cpu/detail/batchnorm_channel.hpp"

#include <cmath>

namespace cnn::cpu {

[[gnu::noinline]] void normalise_channel(const Tensor& x, float gamma, float beta, float mean, float inv_std,
                                         std::size_t ch, Tensor& y) {
  const float scale = gamma * inv_std;
  const float shift = beta - mean * scale;
  for_each_in_channel(x, ch, [&](std::size_t i) { y.data[i] = x.data[i] * scale + shift; });
}

void finish_channel(const BatchNormChannel& b, std::size_t ch, double mean, double var, double count) {
  const float inv_std = static_cast<float>(1.0 / std::sqrt(var + b.epsilon));
  normalise_channel(b.x, b.gamma.data[ch], b.beta.data[ch], static_cast<float>(mean), inv_std, ch, b.y);
  b.saved_mean.data[ch] = static_cast<float>(mean);
  b.saved_inv_std.data[ch] = inv_std;
  const double unbiased = count > 1 ? var * count / (count - 1) : var;
  b.running_mean.data[ch] = static_cast<float>((1.0 - b.momentum) * b.running_mean.data[ch] + b.momentum * mean);
  b.running_var.data[ch] = static_cast<float>((1.0 - b.momentum) * b.running_var.data[ch] + b.momentum * unbiased);
}

void input_gradient(const BatchNormGradient& g, std::size_t ch, double sum_dy, double sum_dy_xhat, double count) {
  const double mean = g.saved_mean.data[ch], inv_std = g.saved_inv_std.data[ch];
  const double scale = g.gamma.data[ch] * inv_std / count;
  for_each_in_channel(g.x, ch, [&](std::size_t i) {
    const double xhat = (g.x.data[i] - mean) * inv_std;
    const float d = static_cast<float>(scale * (count * g.dy.data[i] - sum_dy - xhat * sum_dy_xhat));
    if (g.accumulate) g.dx.data[i] += d;
    else g.dx.data[i] = d;
  });
}

[[gnu::noinline]] ChannelGradientSums gradient_sums(const Tensor& x, const Tensor& dy, std::size_t ch, double mean,
                                                   double inv_std) {
  ChannelGradientSums s{};
  channel_sums(
      x, ch, [&](std::size_t i) { return double(dy.data[i]); },
      [&](std::size_t i) { return dy.data[i] * (x.data[i] - mean) * inv_std; }, s.dy, s.dy_xhat);
  return s;
}

}  // namespace cnn::cpu
