#include "backends/cpu/detail/batchnorm_channel.hpp"

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <type_traits>

#include "backends/cpu/detail/cpu_isa.hpp"

#define CNN_ISA_KERNELS "backends/cpu/detail/batchnorm_channel.inl"
#define CNN_ISA_REGION 0
#include "backends/cpu/detail/isa_region.hpp"
#define CNN_ISA_REGION 1
#include "backends/cpu/detail/isa_region.hpp"
#define CNN_ISA_REGION 2
#include "backends/cpu/detail/isa_region.hpp"

namespace cnn::cpu {
namespace {

// One region's passes, for the host's instructions.
struct Passes {
  decltype(&normalise_channel) normalise;
  decltype(&channel_moments) moments;
  decltype(&input_gradient) input;
  decltype(&gradient_sums) sums;
};

Passes passes() {
  switch (region_for(CpuIsa::avx512)) {
#if CNN_ISA_REGIONS
    case CpuIsa::avx512:
      return {isa_avx512::batchnorm::normalise_channel, isa_avx512::batchnorm::moments,
              isa_avx512::batchnorm::input_gradient, isa_avx512::batchnorm::gradient_sums};
    case CpuIsa::avx2:
      return {isa_avx2::batchnorm::normalise_channel, isa_avx2::batchnorm::moments, isa_avx2::batchnorm::input_gradient,
              isa_avx2::batchnorm::gradient_sums};
#endif
    default:
      return {isa_portable::batchnorm::normalise_channel, isa_portable::batchnorm::moments,
              isa_portable::batchnorm::input_gradient, isa_portable::batchnorm::gradient_sums};
  }
}

}  // namespace

void normalise_channel(const Tensor& x, float gamma, float beta, float mean, float inv_std, std::size_t ch, Tensor& y,
                       bool relu, const Tensor* residual) {
  if (residual != nullptr && !relu) throw std::logic_error("normalise_channel: a residual without its ReLU");
  passes().normalise(x, gamma, beta, mean, inv_std, ch, y, relu, residual);
}

ChannelMoments channel_moments(const Tensor& x, std::size_t ch, double count) {
  return passes().moments(x, ch, count);
}

void finish_channel(const BatchNormChannel& b, std::size_t ch, double mean, double var, double count) {
  const float inv_std = static_cast<float>(1.0 / std::sqrt(var + b.epsilon));
  normalise_channel(b.x, b.gamma.data[ch], b.beta.data[ch], static_cast<float>(mean), inv_std, ch, b.y, b.relu,
                    b.residual);
  b.saved_mean.data[ch] = static_cast<float>(mean);
  b.saved_inv_std.data[ch] = inv_std;
  const double unbiased = count > 1 ? var * count / (count - 1) : var;
  b.running_mean.data[ch] = static_cast<float>((1.0 - b.momentum) * b.running_mean.data[ch] + b.momentum * mean);
  b.running_var.data[ch] = static_cast<float>((1.0 - b.momentum) * b.running_var.data[ch] + b.momentum * unbiased);
}

void input_gradient(const BatchNormGradient& g, std::size_t ch, double sum_dy, double sum_dy_xhat, double count) {
  if (g.residual_gradient != nullptr && g.relu_output == nullptr)
    throw std::logic_error("input_gradient: a residual's gradient without the ReLU's output");
  passes().input(g, ch, sum_dy, sum_dy_xhat, count);
}

ChannelGradientSums gradient_sums(const Tensor& x, const Tensor& dy, std::size_t ch, double mean, double inv_std,
                                  const Tensor* relu_output) {
  return passes().sums(x, dy, ch, mean, inv_std, relu_output);
}

}  // namespace cnn::cpu
