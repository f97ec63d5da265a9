// Synchronised BatchNorm on the CPU (engine/core/backend.hpp): the per-channel sums the ranks add up,
// and forward and backward from every rank's sums, rounded as the one-rank calls round.
#include <cmath>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/detail/batchnorm_channel.hpp"
#include "backends/cpu/detail/parallel.hpp"

namespace cnn {

void CpuBackend::do_batchnorm_channel_sums(const Tensor& x, Tensor sums) {
  cpu::parallel_ranges(threads_, static_cast<std::size_t>(x.c()), [&](int, std::size_t begin, std::size_t end) {
    for (std::size_t ch = begin; ch < end; ++ch)
      sums.data[ch] = static_cast<float>(cpu::channel_sum(x, ch, [&](std::size_t i) { return x.data[i]; }));
  });
}

void CpuBackend::do_batchnorm_centered_squares(const Tensor& x, const Tensor& sums, double count, Tensor out) {
  cpu::parallel_ranges(threads_, static_cast<std::size_t>(x.c()), [&](int, std::size_t begin, std::size_t end) {
    for (std::size_t ch = begin; ch < end; ++ch) {
      const double mean = sums.data[ch] / count;
      out.data[ch] = static_cast<float>(
          cpu::channel_sum(x, ch, [&](std::size_t i) { return (x.data[i] - mean) * (x.data[i] - mean); }));
    }
  });
}

void CpuBackend::do_batchnorm_forward_from_sums(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y,
                                                Tensor running_mean, Tensor running_var, float momentum, float epsilon,
                                                double count, Tensor saved_mean, Tensor saved_inv_std) {
  const cpu::BatchNormChannel b{x, gamma, beta, y, running_mean, running_var, saved_mean, saved_inv_std, momentum, epsilon};
  cpu::parallel_ranges(threads_, static_cast<std::size_t>(x.c()), [&](int, std::size_t begin, std::size_t end) {
    for (std::size_t ch = begin; ch < end; ++ch)
      cpu::finish_channel(b, ch, saved_mean.data[ch] / count, saved_inv_std.data[ch] / count, count);
  });
}

void CpuBackend::do_batchnorm_backward_sums(const Tensor& x, const Tensor& dy, const Tensor& saved_mean,
                                            const Tensor& saved_inv_std, Tensor sums) {
  const auto c = static_cast<std::size_t>(x.c());
  cpu::parallel_ranges(threads_, c, [&](int, std::size_t begin, std::size_t end) {
    for (std::size_t ch = begin; ch < end; ++ch) {
      const cpu::ChannelGradientSums s = cpu::gradient_sums(x, dy, ch, saved_mean.data[ch], saved_inv_std.data[ch], nullptr);
      sums.data[ch] = static_cast<float>(s.dy);
      sums.data[c + ch] = static_cast<float>(s.dy_xhat);
    }
  });
}

void CpuBackend::do_batchnorm_backward_from_sums(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                                 const Tensor& saved_mean, const Tensor& saved_inv_std,
                                                 const Tensor& sums, double count, Tensor dx, bool accumulate) {
  const auto c = static_cast<std::size_t>(x.c());
  const cpu::BatchNormGradient g{x, dy, gamma, saved_mean, saved_inv_std, dx, accumulate};
  cpu::parallel_ranges(threads_, c, [&](int, std::size_t begin, std::size_t end) {
    for (std::size_t ch = begin; ch < end; ++ch) cpu::input_gradient(g, ch, sums.data[ch], sums.data[c + ch], count);
  });
}

}  // namespace cnn
