#include "cnnengine/backends/cpu/detail/batchnorm_channel.hpp"

#include <cmath>

namespace cnn::cpu {

[[gnu::noinline]] void normalise_channel(const Tensor& x, float gamma, float beta, float mean, float inv_std,
                                         std::size_t ch, Tensor& y) {
  const int n = x.n(), c = x.c();
  const std::size_t hw = static_cast<std::size_t>(x.h()) * x.w();
  const float scale = gamma * inv_std;
  const float shift = beta - mean * scale;
  for (int i = 0; i < n; ++i) {
    const std::size_t offset = (static_cast<std::size_t>(i) * c + ch) * hw;
    for (std::size_t k = 0; k < hw; ++k) y.data[offset + k] = x.data[offset + k] * scale + shift;
  }
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

}  // namespace cnn::cpu
