// Group normalisation on the CPU (Backend::group_norm_forward and group_norm_backward). A sample's
// group is one contiguous run of channels x H x W values, which one thread takes whole: its mean,
// then its centred squares, each summed in double over 16 lanes (vectorised, the same order every
// call, accurate for runs of millions of values), then y while the run is still in cache.
// Backward with per-channel gamma reads each (sample, group) once: its per-channel sums, then dx
// from cache; dgamma and dbeta add the per-(sample, channel) sums in sample order. Layer norm's
// per-element gamma needs the group's sums before any dx, so it takes two passes: the sums, then dx
// with dgamma and dbeta by blocks of elements over the samples in order. No sum depends on which
// thread ran what. Backward's scratch sums are its workspace, a chunk of samples at a time.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/detail/every_micro_batch.hpp"
#include "backends/cpu/detail/parallel.hpp"
#include <cnnengine/base/error.hpp>

namespace cnn {
namespace {

// Never across a library boundary, so the calling convention compilers warn of (-Wpsabi) does not
// matter.
#pragma GCC diagnostic ignored "-Wpsabi"
using Floats8 = float __attribute__((vector_size(32)));
using Floats16 = float __attribute__((vector_size(64)));
using Doubles8 = double __attribute__((vector_size(64)));

Floats16 load16(const float* p) {
  Floats16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
Doubles8 low_half(Floats16 v) {
  return __builtin_convertvector(__builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7), Doubles8);
}
Doubles8 high_half(Floats16 v) {
  return __builtin_convertvector(__builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15), Doubles8);
}

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

// Sums over n values of g = dy (times gamma per value, where given) and of g (x - mean), in double.
// Each 64 values are first summed in float, 4 to a lane (x - mean, both floats, is exact near the
// mean), so the error stays that of the double sum, whatever n, at a quarter of the conversions.
struct GradientSums {
  double dy = 0, dy_centred = 0;
};
template <bool kGamma>
GradientSums gradient_sums(const float* x, const float* dy, const float* gamma, std::size_t n, float mean) {
  const Floats16 m = mean - Floats16{};
  Doubles8 s0 = {}, s1 = {}, t0 = {}, t1 = {};
  auto add = [&](Floats16 s, Floats16 t) {
    s0 += low_half(s);
    s1 += high_half(s);
    t0 += low_half(t);
    t1 += high_half(t);
  };
  auto step = [&](std::size_t k, Floats16& s, Floats16& t) {
    Floats16 g = load16(dy + k);
    if constexpr (kGamma) g *= load16(gamma + k);
    s += g;
    t += g * (load16(x + k) - m);
  };
  std::size_t k = 0;
  for (; k + 64 <= n; k += 64) {
    Floats16 s = {}, t = {};
    for (std::size_t j = 0; j < 64; j += 16) step(k + j, s, t);
    add(s, t);
  }
  for (; k + 16 <= n; k += 16) {
    Floats16 s = {}, t = {};
    step(k, s, t);
    add(s, t);
  }
  double s_tail = 0, t_tail = 0;
  for (; k < n; ++k) {
    const float g = kGamma ? dy[k] * gamma[k] : dy[k];
    s_tail += g;
    t_tail += static_cast<double>(g) * (x[k] - mean);
  }
  return {total(s0 + s1, s_tail), total(t0 + t1, t_tail)};
}

// dx = scale gamma[k] dy + b (x - mean) + c (gamma null: scale has it already), written or added.
// Centred, so that a group far from zero loses no precision to b x cancelling c.
struct InputGradient {
  float scale, b, c, mean;
};
// From the sums over a group's `count` values of dy gamma and of dy gamma (x - mean):
// dx = inv_std / M x (M dy gamma - sum(dy gamma) - xhat sum(dy gamma xhat)), that is
// b = -inv_std^3 sum(dy gamma (x - mean)) / M and c = -inv_std sum(dy gamma) / M.
InputGradient input_gradient(double sum_dy_gamma, double sum_dy_gamma_centred, std::size_t count, float mean,
                             float inv_std) {
  const double m = static_cast<double>(count), inv = inv_std;
  return {inv_std, static_cast<float>(-inv * inv * inv * sum_dy_gamma_centred / m),
          static_cast<float>(-inv * sum_dy_gamma / m), mean};
}
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
// For a shape that check() accepts (rank 2 or more, groups dividing C).
struct Groups {
  std::size_t samples, channels, groups, group_channels, plane;
  Groups(const GroupNormDesc& d, const Shape& x)
      : samples(static_cast<std::size_t>(x[0])),
        channels(static_cast<std::size_t>(x[1])),
        groups(static_cast<std::size_t>(d.groups)),
        group_channels(channels / groups),
        plane(samples == 0 || channels == 0 ? 0 : x.elements() / (samples * channels)) {}
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

// How backward takes the samples, a chunk at a time, and the scratch doubles that needs: from the
// shape only, for group_norm_workspace_bytes and backward alike. Per-channel gamma keeps a chunk's
// (sample, channel) sums of dy xhat and dy, and their totals over the samples so far; per-element
// gamma keeps a chunk's (sample, group, segment) sums of dy gamma and dy gamma (x - mean). The
// chunks bound the workspace: at most 2 (2^15 + C) doubles, or 2^16 where a sample holds fewer
// than 2^15 segments.
constexpr std::size_t kMaxPairs = 1 << 15;  // (sample, channel) sums kept at once
constexpr std::size_t kChunkValues = 1 << 24, kMaxSegments = 1 << 15, kSegment = 1 << 14;
struct Chunking {
  std::size_t samples = 0;   // per chunk
  std::size_t segments = 0;  // per (sample, group), per-element gamma
  std::size_t doubles = 0;   // the workspace
};
Chunking chunking(const GroupNormDesc& d, const Groups& g) {
  if (g.samples == 0 || g.channels == 0 || g.plane == 0) return {};
  if (!d.per_element_affine) {
    const std::size_t chunk = std::clamp<std::size_t>(kMaxPairs / g.channels, 1, g.samples);
    return {chunk, 0, 2 * g.channels * (chunk + 1)};
  }
  const std::size_t segments = (g.values() + kSegment - 1) / kSegment;
  const std::size_t chunk = std::clamp<std::size_t>(
      std::min(kChunkValues / g.sample_values(), kMaxSegments / (g.groups * segments)), 1, g.samples);
  return {chunk, segments, 2 * chunk * g.groups * segments};
}

double* workspace_doubles(const Workspace& ws, std::size_t doubles) {
  if (ws.bytes < doubles * sizeof(double))
    throw std::logic_error("group_norm_backward: workspace of " + std::to_string(ws.bytes) + " bytes, " +
                           std::to_string(doubles * sizeof(double)) + " needed");
  if (reinterpret_cast<std::uintptr_t>(ws.data) % alignof(double) != 0)
    throw std::logic_error("group_norm_backward: workspace not aligned for doubles");
  return static_cast<double*>(ws.data);
}

// What backward reads and writes; dx, dgamma and dbeta may be empty.
struct Backward {
  const Groups& g;
  const Chunking& chunks;
  double* scratch;
  int threads;
  const float *x, *dy, *gamma, *mean, *inv_std;
  float *dx, *dgamma, *dbeta;
  bool accumulate;
  bool parameters() const { return dgamma || dbeta; }
};

// Per-channel gamma and beta. One pass over each (sample, group): per channel the sums of dy and of
// dy (x - mean), then dx while the group is in cache. The per-(sample, channel) sums go to scratch
// and are added per channel in sample order, a chunk of samples at a time (bounding the scratch):
// dgamma and dbeta do not depend on the threads.
void channel_affine_backward(const Backward& b) {
  const Groups& g = b.g;
  const std::size_t m = g.values(), chunk = b.chunks.samples;
  double* const sums = b.scratch;
  double *const total_g = sums, *const total_b = sums + g.channels;  // over the samples so far
  double *const part_g = total_b + g.channels, *const part_b = part_g + chunk * g.channels;
  std::fill(total_g, total_g + 2 * g.channels, 0.0);
  for (std::size_t first = 0; first < g.samples; first += chunk) {
    const std::size_t samples = std::min(chunk, g.samples - first), items = samples * g.groups;
    cpu::parallel_ranges(useful_threads(b.threads, items * m), items, [&](int, std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) {
        const std::size_t item = first * g.groups + i, at = g.offset(item);
        const std::size_t channel = item % g.groups * g.group_channels, slot = i / g.groups * g.channels + channel;
        const float *in = b.x + at, *grad = b.dy + at;
        const float mean = b.mean[item], inv_std = b.inv_std[item];
        double sum_dy_gamma = 0, sum_dy_gamma_centred = 0;
        for (std::size_t c = 0; c < g.group_channels; ++c) {
          const GradientSums s = gradient_sums<false>(in + c * g.plane, grad + c * g.plane, nullptr, g.plane, mean);
          part_g[slot + c] = s.dy_centred * inv_std;
          part_b[slot + c] = s.dy;
          sum_dy_gamma += b.gamma[channel + c] * s.dy;
          sum_dy_gamma_centred += b.gamma[channel + c] * s.dy_centred;
        }
        if (!b.dx) continue;
        InputGradient f = input_gradient(sum_dy_gamma, sum_dy_gamma_centred, m, mean, inv_std);
        for (std::size_t c = 0; c < g.group_channels; ++c) {
          f.scale = inv_std * b.gamma[channel + c];
          write_input_gradient(in + c * g.plane, grad + c * g.plane, b.dx + at + c * g.plane, nullptr, f, g.plane,
                               b.accumulate);
        }
      }
    });
    if (!b.parameters()) continue;
    for (std::size_t s = 0; s < samples; ++s)
      for (std::size_t c = 0; c < g.channels; ++c) {
        total_g[c] += part_g[s * g.channels + c];
        total_b[c] += part_b[s * g.channels + c];
      }
  }
  for (std::size_t c = 0; c < g.channels; ++c) {
    if (b.dgamma) b.dgamma[c] += static_cast<float>(total_g[c]);
    if (b.dbeta) b.dbeta[c] += static_cast<float>(total_b[c]);
  }
}

// Per-element gamma and beta (layer norm). Two passes over a chunk of samples: first the sums of each
// (sample, group), by segments in parallel (added in segment order), then, by blocks of elements
// with the chunk's samples in order, dx and the block's dgamma and dbeta (in double, added to the
// floats once per chunk). Blocks of 4096 keep the per-sample jumps rare; chunks only bound the
// scratch (one chunk is faster than several that fit the cache). Segments, blocks and chunks
// depend on the shape only, so nothing depends on the threads.
void element_affine_backward(const Backward& b) {
  const Groups& g = b.g;
  constexpr std::size_t kBlock = 4096;
  const std::size_t m = g.values(), per_sample = g.sample_values();
  const std::size_t segments = b.chunks.segments, blocks_per_group = (m + kBlock - 1) / kBlock;
  const std::size_t chunk = b.chunks.samples;
  double* const sums = b.scratch;
  for (std::size_t first = 0; first < g.samples; first += chunk) {
    const std::size_t samples = std::min(chunk, g.samples - first), items = samples * g.groups;
    const int threads = useful_threads(b.threads, samples * per_sample);
    if (b.dx)
      cpu::parallel_ranges(threads, items * segments, [&](int, std::size_t begin, std::size_t end) {
        for (std::size_t u = begin; u < end; ++u) {
          const std::size_t item = first * g.groups + u / segments, from = u % segments * kSegment;
          const std::size_t at = g.offset(item) + from, affine = g.offset(item % g.groups) + from;
          const GradientSums s = gradient_sums<true>(b.x + at, b.dy + at, b.gamma + affine,
                                                     std::min(kSegment, m - from), b.mean[item]);
          sums[2 * u] = s.dy;
          sums[2 * u + 1] = s.dy_centred;
        }
      });
    cpu::parallel_ranges(threads, g.groups * blocks_per_group, [&](int, std::size_t begin, std::size_t end) {
      double block_g[kBlock], block_b[kBlock];
      for (std::size_t block = begin; block < end; ++block) {
        const std::size_t group = block / blocks_per_group, from = block % blocks_per_group * kBlock;
        const std::size_t n = std::min(kBlock, m - from), affine = g.offset(group) + from;
        std::fill(block_g, block_g + n, 0.0);
        std::fill(block_b, block_b + n, 0.0);
        for (std::size_t s = first; s < first + samples; ++s) {
          const std::size_t item = s * g.groups + group, at = g.offset(item) + from;
          const float *in = b.x + at, *grad = b.dy + at;
          if (b.dx) {
            double sum_dy_gamma = 0, sum_dy_gamma_centred = 0;
            const double* u = sums + 2 * (item - first * g.groups) * segments;
            for (std::size_t k = 0; k < segments; ++k) {
              sum_dy_gamma += u[2 * k];
              sum_dy_gamma_centred += u[2 * k + 1];
            }
            write_input_gradient(in, grad, b.dx + at, b.gamma + affine,
                                 input_gradient(sum_dy_gamma, sum_dy_gamma_centred, m, b.mean[item], b.inv_std[item]),
                                 n, b.accumulate);
          }
          if (!b.parameters()) continue;
          const double mean = b.mean[item], inv_std = b.inv_std[item];
          for (std::size_t k = 0; k < n; ++k) {
            block_g[k] += static_cast<double>(grad[k]) * ((in[k] - mean) * inv_std);
            block_b[k] += grad[k];
          }
        }
        if (!b.parameters()) continue;
        for (std::size_t k = 0; k < n; ++k) {
          if (b.dgamma) b.dgamma[affine + k] += static_cast<float>(block_g[k]);
          if (b.dbeta) b.dbeta[affine + k] += static_cast<float>(block_b[k]);
        }
      }
    });
  }
}

}  // namespace

void CpuBackend::do_group_norm_forward(const GroupNormDesc& d, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                       Tensor y, Tensor saved_mean, Tensor saved_inv_std) {
  check("group_norm_forward", d, x, gamma, beta, y);
  const Groups g(d, x.shape);
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

std::size_t CpuBackend::do_group_norm_workspace_bytes(const GroupNormDesc& d, const Shape& x) {
  return cpu::most_over_micro_batches(x[0], [&](int n) { return group_norm_workspace_at(d, cpu::at_batch(x, n)); });
}

std::size_t CpuBackend::group_norm_workspace_at(const GroupNormDesc& d, const Shape& x) const {
  if (x.rank < 2 || d.groups <= 0 || x[1] % d.groups != 0) return 0;  // backward refuses it
  return chunking(d, Groups(d, x)).doubles * sizeof(double);
}

void CpuBackend::do_group_norm_backward(const GroupNormDesc& d, const Tensor& x, const Tensor& dy,
                                        const Tensor& gamma, const Tensor& saved_mean, const Tensor& saved_inv_std,
                                        Tensor dx, bool accumulate, Tensor dgamma, Tensor dbeta, Workspace ws) {
  check("group_norm_backward", d, x, gamma, gamma, dy);
  if (!dx.empty() && dx.elements() != x.elements())
    throw ShapeError("group_norm_backward: input gradient " + dx.shape.str() + " for input " + x.shape.str());
  const Groups g(d, x.shape);
  const Chunking chunks = chunking(d, g);
  double* const scratch = workspace_doubles(ws, chunks.doubles);
  if (x.elements() == 0 || (dx.empty() && dgamma.empty() && dbeta.empty())) return;
  const Backward b{g,
                   chunks,
                   scratch,
                   threads_,
                   x.data,
                   dy.data,
                   gamma.data,
                   saved_mean.data,
                   saved_inv_std.data,
                   dx.empty() ? nullptr : dx.data,
                   dgamma.empty() ? nullptr : dgamma.data,
                   dbeta.empty() ? nullptr : dbeta.data,
                   accumulate};
  if (d.per_element_affine)
    element_affine_backward(b);
  else
    channel_affine_backward(b);
}

}  // namespace cnn
