// Group normalisation on the CPU (Backend::group_norm_forward and group_norm_backward). A sample's
// group is one contiguous run of channels x H x W values, which one thread takes whole: its mean,
// then its centred squares, each summed in double over 16 lanes (vectorised, the same order every
// call, accurate for runs of millions of values), then y while the run is still in cache.
// Backward writes dx per (sample, group) the same way; dgamma and dbeta then come per channel (or
// per element) from the samples in order, so nothing is kept between the two passes and no sum
// depends on which thread ran what.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <string>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/detail/parallel.hpp"
#include "base/error.hpp"

namespace cnn {
namespace {

using Floats8 = float __attribute__((vector_size(32)));
using Doubles8 = double __attribute__((vector_size(64)));

Doubles8 load8(const float* p) {
  Floats8 v;
  std::memcpy(&v, p, sizeof v);
  return __builtin_convertvector(v, Doubles8);
}

// Lanes 0..7 then the tail, in a fixed order.
double total(Doubles8 lanes, double tail) {
  double sum = 0;
  for (int j = 0; j < 8; ++j) sum += lanes[j];
  return sum + tail;
}

double sum_of(const float* x, std::size_t n) {
  Doubles8 a = {}, b = {};
  std::size_t k = 0;
  for (; k + 16 <= n; k += 16) {
    a += load8(x + k);
    b += load8(x + k + 8);
  }
  double tail = 0;
  for (; k < n; ++k) tail += x[k];
  return total(a + b, tail);
}

double centred_squares(const float* x, std::size_t n, double mean) {
  const Doubles8 m = mean - Doubles8{};
  Doubles8 a = {}, b = {};
  std::size_t k = 0;
  for (; k + 16 <= n; k += 16) {
    const Doubles8 d0 = load8(x + k) - m, d1 = load8(x + k + 8) - m;
    a += d0 * d0;
    b += d1 * d1;
  }
  double tail = 0;
  for (; k < n; ++k) tail += (x[k] - mean) * (x[k] - mean);
  return total(a + b, tail);
}

// sum of dy and of dy * (x - mean) over n values (gamma, where given, multiplies both per value).
struct GradientSums {
  double dy = 0, dy_centred = 0;
};
GradientSums gradient_sums(const float* x, const float* dy, const float* gamma, std::size_t n, double mean) {
  const Doubles8 m = mean - Doubles8{};
  Doubles8 s = {}, t = {};
  std::size_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const Doubles8 g = gamma ? load8(dy + k) * load8(gamma + k) : load8(dy + k);
    s += g;
    t += g * (load8(x + k) - m);
  }
  double s_tail = 0, t_tail = 0;
  for (; k < n; ++k) {
    const double g = gamma ? static_cast<double>(dy[k]) * gamma[k] : dy[k];
    s_tail += g;
    t_tail += g * (x[k] - mean);
  }
  return {total(s, s_tail), total(t, t_tail)};
}

// dx = scale gamma[k] dy + b (x - mean) + c (gamma null: scale has it already), written or added.
// Centred, so that a group far from zero loses no precision to b x cancelling c.
struct InputGradient {
  float scale, b, c, mean;
};
void write_input_gradient(const float* x, const float* dy, float* dx, const float* gamma, InputGradient f,
                          std::size_t n, bool accumulate) {
  if (gamma && accumulate) {
    for (std::size_t k = 0; k < n; ++k) dx[k] += f.scale * gamma[k] * dy[k] + f.b * (x[k] - f.mean) + f.c;
  } else if (gamma) {
    for (std::size_t k = 0; k < n; ++k) dx[k] = f.scale * gamma[k] * dy[k] + f.b * (x[k] - f.mean) + f.c;
  } else if (accumulate) {
    for (std::size_t k = 0; k < n; ++k) dx[k] += f.scale * dy[k] + f.b * (x[k] - f.mean) + f.c;
  } else {
    for (std::size_t k = 0; k < n; ++k) dx[k] = f.scale * dy[k] + f.b * (x[k] - f.mean) + f.c;
  }
}

// Where the values of (sample, group) are, and how many; the channels of a group are contiguous.
struct Groups {
  std::size_t samples, channels, groups, group_channels, plane;
  Groups(const GroupNormDesc& d, const Tensor& x)
      : samples(static_cast<std::size_t>(x.n())),
        channels(static_cast<std::size_t>(x.c())),
        groups(static_cast<std::size_t>(d.groups)),
        group_channels(channels / groups),
        plane(x.sample_elements() / channels) {}
  std::size_t values() const { return group_channels * plane; }           // per (sample, group)
  std::size_t offset(std::size_t item) const { return item * values(); }  // item = sample x groups + group
  std::size_t sample_values() const { return channels * plane; }
};

void check(const char* call, const GroupNormDesc& d, const Tensor& x, const Tensor& gamma, const Tensor& beta,
           const Tensor& out) {
  const int c = x.c();
  const std::size_t affine = d.per_element_affine ? x.sample_elements() : static_cast<std::size_t>(c);
  if (x.shape.rank < 2 || d.groups <= 0 || c % d.groups != 0 || gamma.elements() != affine ||
      beta.elements() != affine || out.elements() != x.elements())
    throw ShapeError(std::string(call) + ": " + std::to_string(d.groups) + " groups of input " + x.shape.str() +
                     " with gamma " + gamma.shape.str() + ", beta " + beta.shape.str() + ", " + out.shape.str());
}

// Threads worth waking for `values` values (as cpu::parallel_elements decides).
int useful_threads(int threads, std::size_t values) {
  constexpr std::size_t kMinPerThread = 1 << 15;
  return static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(threads), values / kMinPerThread + 1));
}

}  // namespace

void CpuBackend::group_norm_forward(const GroupNormDesc& d, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                    Tensor y, Tensor saved_mean, Tensor saved_inv_std) {
  check("group_norm_forward", d, x, gamma, beta, y);
  const Groups g(d, x);
  const std::size_t items = g.samples * g.groups, m = g.values();
  cpu::parallel_ranges(useful_threads(threads_, x.elements()), items, [&](int, std::size_t begin, std::size_t end) {
    for (std::size_t item = begin; item < end; ++item) {
      const float* in = x.data + g.offset(item);
      float* out = y.data + g.offset(item);
      const double mean = sum_of(in, m) / static_cast<double>(m);
      const double var = centred_squares(in, m, mean) / static_cast<double>(m);
      // y and backward both use the statistics as saved (floats).
      const float mean_f = static_cast<float>(mean);
      const float inv_std = static_cast<float>(1.0 / std::sqrt(var + static_cast<double>(d.epsilon)));
      if (!saved_mean.empty()) saved_mean.data[item] = mean_f;
      if (!saved_inv_std.empty()) saved_inv_std.data[item] = inv_std;
      if (d.per_element_affine) {
        const std::size_t first = g.offset(item % g.groups);  // within the sample
        const float* ga = gamma.data + first;
        const float* be = beta.data + first;
        for (std::size_t k = 0; k < m; ++k) out[k] = (in[k] - mean_f) * inv_std * ga[k] + be[k];
        continue;
      }
      const std::size_t first_channel = item % g.groups * g.group_channels;
      for (std::size_t c = 0; c < g.group_channels; ++c) {
        const float scale = gamma.data[first_channel + c] * inv_std, shift = beta.data[first_channel + c];
        const float* pin = in + c * g.plane;
        float* pout = out + c * g.plane;
        for (std::size_t k = 0; k < g.plane; ++k) pout[k] = (pin[k] - mean_f) * scale + shift;
      }
    }
  });
}

void CpuBackend::group_norm_backward(const GroupNormDesc& d, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                     const Tensor& saved_mean, const Tensor& saved_inv_std, Tensor dx, bool accumulate,
                                     Tensor dgamma, Tensor dbeta) {
  check("group_norm_backward", d, x, gamma, gamma, dy);
  if (!dx.empty() && dx.elements() != x.elements())
    throw ShapeError("group_norm_backward: input gradient " + dx.shape.str() + " for input " + x.shape.str());
  const Groups g(d, x);
  const std::size_t items = g.samples * g.groups, m = g.values();
  const int threads = useful_threads(threads_, x.elements());

  // dx = inv_std / M x (M dy gamma - sum(dy gamma) - xhat sum(dy gamma xhat)) over each group's M
  // values, as dx = (inv_std gamma) dy + b (x - mean) + c with b = -inv_std^3 sum(dy gamma (x - mean)) / M
  // and c = -inv_std sum(dy gamma) / M.
  if (!dx.empty())
    cpu::parallel_ranges(threads, items, [&](int, std::size_t begin, std::size_t end) {
      for (std::size_t item = begin; item < end; ++item) {
        const std::size_t at = g.offset(item);
        const float *in = x.data + at, *grad = dy.data + at;
        float* out = dx.data + at;
        const double mean = saved_mean.data[item], inv_std = saved_inv_std.data[item];
        const std::size_t first = d.per_element_affine ? g.offset(item % g.groups) : item % g.groups * g.group_channels;
        double sum_dy_gamma = 0, sum_dy_gamma_centred = 0;
        if (d.per_element_affine) {
          const GradientSums s = gradient_sums(in, grad, gamma.data + first, m, mean);
          sum_dy_gamma = s.dy;
          sum_dy_gamma_centred = s.dy_centred;
        } else {
          for (std::size_t c = 0; c < g.group_channels; ++c) {
            const GradientSums s = gradient_sums(in + c * g.plane, grad + c * g.plane, nullptr, g.plane, mean);
            sum_dy_gamma += gamma.data[first + c] * s.dy;
            sum_dy_gamma_centred += gamma.data[first + c] * s.dy_centred;
          }
        }
        const double count = static_cast<double>(m);
        const double a = inv_std * inv_std * inv_std * sum_dy_gamma_centred / count;
        InputGradient f{static_cast<float>(inv_std), static_cast<float>(-a),
                        static_cast<float>(-inv_std * sum_dy_gamma / count), saved_mean.data[item]};
        if (d.per_element_affine) {
          write_input_gradient(in, grad, out, gamma.data + first, f, m, accumulate);
        } else {
          for (std::size_t c = 0; c < g.group_channels; ++c) {
            f.scale = static_cast<float>(inv_std * gamma.data[first + c]);
            write_input_gradient(in + c * g.plane, grad + c * g.plane, out + c * g.plane, nullptr, f, g.plane,
                                 accumulate);
          }
        }
      }
    });

  if (dgamma.empty() && dbeta.empty()) return;
  if (d.per_element_affine) {
    // dgamma[i] += sum over samples of dy xhat, dbeta[i] += of dy: blocks of elements in double.
    constexpr std::size_t kBlock = 256;
    const std::size_t per_sample = g.sample_values(), blocks = (per_sample + kBlock - 1) / kBlock;
    cpu::parallel_ranges(threads, blocks, [&](int, std::size_t begin, std::size_t end) {
      for (std::size_t block = begin; block < end; ++block) {
        const std::size_t first = block * kBlock, n = std::min(kBlock, per_sample - first);
        double sum_g[kBlock] = {}, sum_b[kBlock] = {};
        for (std::size_t s = 0; s < g.samples; ++s) {
          const std::size_t at = s * per_sample + first;
          const double mean = saved_mean.data[s], inv_std = saved_inv_std.data[s];
          const float *in = x.data + at, *grad = dy.data + at;
          for (std::size_t k = 0; k < n; ++k) {
            sum_g[k] += static_cast<double>(grad[k]) * ((in[k] - mean) * inv_std);
            sum_b[k] += grad[k];
          }
        }
        for (std::size_t k = 0; k < n; ++k) {
          if (!dgamma.empty()) dgamma.data[first + k] += static_cast<float>(sum_g[k]);
          if (!dbeta.empty()) dbeta.data[first + k] += static_cast<float>(sum_b[k]);
        }
      }
    });
    return;
  }
  // Per channel: the sums over H and W of each sample, in sample order.
  cpu::parallel_ranges(threads, g.channels, [&](int, std::size_t begin, std::size_t end) {
    for (std::size_t c = begin; c < end; ++c) {
      double sum_g = 0, sum_b = 0;
      const std::size_t group = c / g.group_channels;
      for (std::size_t s = 0; s < g.samples; ++s) {
        const std::size_t item = s * g.groups + group, at = (s * g.channels + c) * g.plane;
        const GradientSums sums = gradient_sums(x.data + at, dy.data + at, nullptr, g.plane, saved_mean.data[item]);
        sum_g += sums.dy_centred * saved_inv_std.data[item];
        sum_b += sums.dy;
      }
      if (!dgamma.empty()) dgamma.data[c] += static_cast<float>(sum_g);
      if (!dbeta.empty()) dbeta.data[c] += static_cast<float>(sum_b);
    }
  });
}

}  // namespace cnn
