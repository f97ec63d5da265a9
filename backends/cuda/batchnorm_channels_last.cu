// BatchNorm's own training kernels for channels-last images (Note [Channels-last images],
// tensor.hpp), forward and backward, with the ReLU and the residual add of the fused calls.
//
// Note [BatchNorm over channels-last images]
// A channel's values lie C apart, so the NCHW kernels' plan, a block (or a cluster) a channel
// (Note [One block a channel], batchnorm_kernels.cu), would read 2 bytes of every 32 it fetches.
// Here a pass is two launches over the pixels (N x H x W) in memory order:
//  1. The sums. Blocks form a grid of channel groups (64 channels, or all C where C is not a
//     multiple of 64) by splits of the pixels (even, in order). A block's threads each take V
//     adjacent channels of its group at every `rows`-th pixel of its split, so a warp reads
//     consecutive bytes, and sum them in double; the block's first row adds the other rows' sums
//     in row order and writes the block's line of `partials` [splits][C][2]. The last block of a
//     group to finish (a counter a group, Mark Harris's threadfence reduction) adds the group's
//     lines in split order, a warp a channel (each lane every 32nd split in order, then a fixed
//     tree), and writes the statistics (forward) or the parameter gradients (backward) and what
//     step 2 needs per channel. Whichever block is last, the order is the same.
//  2. One thread a vector of V channels of a pixel writes the output.
// `partials` and the counters are the backend's (CudaBackend::channel_partials_, allocated and
// zeroed with it and counted in library_reserved_bytes; the last block sets its counter back to
// zero): no workspace, and nothing allocated in a step. The splits depend on the shape and the
// device alone, so a run gives the same bits every time. The arithmetic is the NCHW kernels',
// value for value; only the order of the sums differs.
#include <algorithm>
#include <cstddef>
#include <string>
#include <type_traits>

#include "backends/cuda/detail/batchnorm_statistics.cuh"
#include "backends/cuda/detail/check.hpp"
#include "backends/cuda/detail/cuda_backend_impl.hpp"
#include "backends/cuda/detail/grid_stride.cuh"
#include "backends/cuda/detail/values16.cuh"
#include <cnnengine/base/error.hpp>

namespace cnn::cuda {
namespace {

constexpr int kThreads = 256, kWarp = 32;
constexpr int kGroupChannels = 64;
// The most threads a pixel's channels of a group take (`lanes` = group / V), and splits a group.
constexpr int kMostLanes = kThreads, kMostSplits = 512;
// The counters (one a group) at the front of the partials' memory.
constexpr std::size_t kCounterBytes = 4096;
constexpr int kMostGroups = static_cast<int>(kCounterBytes / sizeof(unsigned));

// How step 1 splits the work: `groups` channel groups of `group` channels, `lanes` threads a pixel
// (V channels each), `rows` pixels a round, `splits` blocks of `threads` a group, each with
// `shared_bytes` of dynamic shared memory.
struct ChannelSplit {
  std::size_t pixels;
  int channels, group, groups, lanes, rows, splits, threads;
  std::size_t shared_bytes;
  __device__ std::size_t begin(unsigned split) const { return pixels * split / static_cast<unsigned>(splits); }
};

ChannelSplit split_channels(const char* call, const Tensor& x, int vector, int multiprocessors,
                            std::size_t partials_bytes) {
  ChannelSplit s{};
  s.channels = x.c();
  s.group = s.channels % kGroupChannels == 0 ? kGroupChannels : s.channels;
  s.groups = s.channels / s.group;
  s.lanes = s.group / vector;
  if (s.lanes > kMostLanes || s.groups > kMostGroups)
    throw ConfigError(std::string(call) + ": " + x.shape.str() + " read " + std::to_string(vector) +
                      " channels at a time; channels-last BatchNorm takes up to " + std::to_string(kMostLanes) +
                      " reads a pixel (" + std::to_string(kMostLanes * 8) + " channels), or a multiple of " +
                      std::to_string(kGroupChannels) + " up to " + std::to_string(kMostGroups * kGroupChannels) +
                      " channels");
  s.pixels = x.elements() / static_cast<std::size_t>(s.channels);
  s.rows = std::max(1, kThreads / s.lanes);
  s.threads = s.rows * s.lanes;
  // About four blocks a multiprocessor in all, each of four rounds of rows or more, their lines
  // (and one more, for step 2's per-channel values) within the partials.
  const std::size_t line_bytes = 2 * sizeof(double) * static_cast<std::size_t>(s.channels);
  const std::size_t fit = (partials_bytes - kCounterBytes) / line_bytes - 1;
  const std::size_t wanted = (std::size_t{4} * static_cast<std::size_t>(multiprocessors) + s.groups - 1) / s.groups;
  const std::size_t round = 4 * static_cast<std::size_t>(s.rows);
  const std::size_t rounds = (s.pixels + round - 1) / round;
  s.splits = static_cast<int>(
      std::max<std::size_t>(1, std::min({wanted, rounds, fit, static_cast<std::size_t>(kMostSplits)})));
  s.shared_bytes = static_cast<std::size_t>(s.threads) * 2 * static_cast<std::size_t>(vector) * sizeof(double);
  return s;
}

// The block's sums a and b of its rows, added in row order by row 0 into its line of `partials`.
template <int V>
__device__ void write_block_sums(const ChannelSplit& s, int lane, int row, const double (&a)[V],
                                 const double (&b)[V], double* partials) {
  extern __shared__ double row_sums[];  // [rows * lanes][2 V]
  double* mine = row_sums + static_cast<std::size_t>(threadIdx.x) * 2 * V;
#pragma unroll
  for (int k = 0; k < V; ++k) mine[k] = a[k], mine[V + k] = b[k];
  __syncthreads();
  if (row != 0) return;
  double sa[V], sb[V];
#pragma unroll
  for (int k = 0; k < V; ++k) sa[k] = a[k], sb[k] = b[k];
  for (int r = 1; r < s.rows; ++r) {
    const double* other = row_sums + static_cast<std::size_t>(r * s.lanes + lane) * 2 * V;
#pragma unroll
    for (int k = 0; k < V; ++k) sa[k] += other[k], sb[k] += other[V + k];
  }
  double* line = partials + (static_cast<std::size_t>(blockIdx.x) * s.channels +
                             static_cast<std::size_t>(blockIdx.y) * s.group + static_cast<std::size_t>(lane) * V) *
                                2;
#pragma unroll
  for (int k = 0; k < V; ++k) line[2 * k] = sa[k], line[2 * k + 1] = sb[k];
}

// True in the last of a group's blocks to write its line (every block's writes then visible to
// it); that block sets the group's counter back to zero.
__device__ bool last_of_group(unsigned* counters, int splits) {
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    last = atomicAdd(&counters[blockIdx.y], 1u) == static_cast<unsigned>(splits) - 1;
    if (last) atomicExch(&counters[blockIdx.y], 0u);
  }
  __syncthreads();
  return last;
}

// In the last block: channel ch's two sums over every split, in split order by lanes (lane l
// takes splits l, l + 32, ...) and then a fixed tree; lane 0 gets them.
__device__ void group_totals(const ChannelSplit& s, const double* partials, int ch, int lane, double& a, double& b) {
  a = 0, b = 0;
  for (int split = lane; split < s.splits; split += kWarp) {
    const std::size_t at = (static_cast<std::size_t>(split) * s.channels + ch) * 2;
    a += __ldcg(partials + at);
    b += __ldcg(partials + at + 1);
  }
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    a += __shfl_down_sync(0xffffffffu, a, offset);
    b += __shfl_down_sync(0xffffffffu, b, offset);
  }
}

// Each channel of the block's group, a whole warp at a time (a block's last, partial warp takes
// none): finish(ch, a, b) on lane 0 with its totals.
template <class Finish>
__device__ void for_each_group_channel(const ChannelSplit& s, const double* partials, Finish&& finish) {
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  const int warps = static_cast<int>(blockDim.x) / kWarp;
  if (warp >= warps) return;
  for (int k = warp; k < s.group; k += warps) {
    const int ch = static_cast<int>(blockIdx.y) * s.group + k;
    double a, b;
    group_totals(s, partials, ch, lane, a, b);
    if (lane == 0) finish(ch, a, b);
  }
}

// Step 1 forward: the sums of x and x^2, then in a group's last block the statistics, as
// training_forward_kernel computes them, and each channel's scale and shift in `scale_shift` [2][C].
template <ValueFormat F, int V>
__global__ void __launch_bounds__(kThreads)
    statistics_kernel(ValuesIn x, ChannelSplit s, double* partials, unsigned* counters, const float* gamma,
                      const float* beta, float* running_mean, float* running_var, float* saved_mean,
                      float* saved_inv_std, float momentum, float epsilon, float* scale_shift) {
  const int lane = static_cast<int>(threadIdx.x) % s.lanes, row = static_cast<int>(threadIdx.x) / s.lanes;
  const std::size_t c0 = static_cast<std::size_t>(blockIdx.y) * s.group + static_cast<std::size_t>(lane) * V;
  double sum[V] = {}, squares[V] = {};
  const std::size_t end = s.begin(blockIdx.x + 1);
  for (std::size_t p = s.begin(blockIdx.x) + row; p < end; p += s.rows) {
    float v[V];
    load_values<F, V>(x, p * s.channels + c0, v);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      sum[k] += v[k];
      squares[k] += static_cast<double>(v[k]) * v[k];
    }
  }
  write_block_sums<V>(s, lane, row, sum, squares, partials);
  if (!last_of_group(counters, s.splits)) return;
  const double count = static_cast<double>(s.pixels);
  for_each_group_channel(s, partials, [&](int ch, double total, double total_squares) {
    const BatchStatistics stats = batch_statistics(total, total_squares, count, epsilon);
    record_statistics(static_cast<std::size_t>(ch), stats, count, momentum, running_mean, running_var, saved_mean,
                      saved_inv_std);
    const float scale = gamma[ch] * stats.inv_std;
    scale_shift[ch] = scale;
    scale_shift[s.channels + ch] = fmaf(-static_cast<float>(stats.mean), scale, beta[ch]);
  });
}

// Step 2 forward: y = x * scale + shift, plus the residual, through the ReLU, as
// training_forward_kernel writes it.
template <ValueFormat F, int V>
__global__ void normalise_pixels_kernel(ValuesIn x, ValuesIn residual, ValuesOut y, const float* scale_shift,
                                        std::size_t pixels, int channels, bool relu) {
  const auto lanes = static_cast<std::size_t>(channels / V);
  const bool add = residual.wide || residual.packed;
  CNN_FOR_EACH_ELEMENT(j, pixels * lanes) {
    const std::size_t at = j * V;  // pixel j / lanes, channels (j % lanes) * V on
    const std::size_t c0 = (j % lanes) * V;
    float v[V], r[V];
    load_values<F, V>(x, at, v);
    if (add) load_values<F, V>(residual, at, r);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      v[k] = fmaf(v[k], scale_shift[c0 + k], scale_shift[channels + c0 + k]);
      if (add) v[k] = (y.packed ? widened<F>(narrowed<F>(v[k])) : v[k]) + r[k];
      if (relu) v[k] = v[k] > 0.0f ? v[k] : 0.0f;
    }
    store_values<F, V>(y, at, v);
  }
}

// The gradient reaching BatchNorm's output at `at`: dy, zero where the ReLU's output is not
// positive (relu_y given).
template <ValueFormat F, int V>
__device__ void output_gradient(const float* dy, const ValuesIn& relu_y, std::size_t at, float (&g)[V]) {
  load_values<F, V>(ValuesIn{dy, nullptr}, at, g);
  if (!relu_y.wide && !relu_y.packed) return;
  float out[V];
  load_values<F, V>(relu_y, at, out);
#pragma unroll
  for (int k = 0; k < V; ++k) g[k] = out[k] > 0.0f ? g[k] : 0.0f;
}

// Step 1 backward: the sums of the gradient g and of g * xhat, the residual's gradient (g, or
// added to it) written on the way, as training_backward_kernel writes it; then in a group's last
// block the parameter gradients (added to) and each channel's sums in `totals` [C][2].
template <ValueFormat F, int V>
__global__ void __launch_bounds__(kThreads)
    gradient_sums_kernel(ValuesIn x, const float* dy, ValuesIn relu_y, const float* saved_mean,
                         const float* saved_inv_std, float* dresidual, bool accumulate_residual, ChannelSplit s,
                         double* partials, unsigned* counters, float* dgamma, float* dbeta, double* totals) {
  const int lane = static_cast<int>(threadIdx.x) % s.lanes, row = static_cast<int>(threadIdx.x) / s.lanes;
  const std::size_t c0 = static_cast<std::size_t>(blockIdx.y) * s.group + static_cast<std::size_t>(lane) * V;
  double mean[V], inv_std[V], sum_dy[V] = {}, sum_dy_xhat[V] = {};
#pragma unroll
  for (int k = 0; k < V; ++k) mean[k] = saved_mean[c0 + k], inv_std[k] = saved_inv_std[c0 + k];
  const std::size_t end = s.begin(blockIdx.x + 1);
  for (std::size_t p = s.begin(blockIdx.x) + row; p < end; p += s.rows) {
    const std::size_t at = p * s.channels + c0;
    float v[V], g[V];
    load_values<F, V>(x, at, v);
    output_gradient<F, V>(dy, relu_y, at, g);
    if (dresidual) {
      float d[V];
      if (accumulate_residual) load_values<F, V>(ValuesIn{dresidual, nullptr}, at, d);
#pragma unroll
      for (int k = 0; k < V; ++k) d[k] = accumulate_residual ? d[k] + g[k] : g[k];
      store_values<F, V>(ValuesOut{dresidual, nullptr}, at, d);
    }
#pragma unroll
    for (int k = 0; k < V; ++k) {
      sum_dy[k] += g[k];
      sum_dy_xhat[k] += static_cast<double>(g[k]) * ((v[k] - mean[k]) * inv_std[k]);
    }
  }
  write_block_sums<V>(s, lane, row, sum_dy, sum_dy_xhat, partials);
  if (!last_of_group(counters, s.splits)) return;
  for_each_group_channel(s, partials, [&](int ch, double total_dy, double total_dy_xhat) {
    if (dgamma) dgamma[ch] += static_cast<float>(total_dy_xhat);
    if (dbeta) dbeta[ch] += static_cast<float>(total_dy);
    totals[ch * 2] = total_dy;
    totals[ch * 2 + 1] = total_dy_xhat;
  });
}

// Step 2 backward: dx, written or added to, as training_backward_kernel computes it.
template <ValueFormat F, int V>
__global__ void input_gradient_kernel(ValuesIn x, const float* dy, ValuesIn relu_y, const float* gamma,
                                      const float* saved_mean, const float* saved_inv_std, const double* totals,
                                      float* dx, bool accumulate, std::size_t pixels, int channels) {
  const auto lanes = static_cast<std::size_t>(channels / V);
  const double count = static_cast<double>(pixels);
  CNN_FOR_EACH_ELEMENT(j, pixels * lanes) {
    const std::size_t at = j * V;
    const std::size_t c0 = (j % lanes) * V;
    float v[V], g[V], d[V];
    load_values<F, V>(x, at, v);
    output_gradient<F, V>(dy, relu_y, at, g);
    if (accumulate) load_values<F, V>(ValuesIn{dx, nullptr}, at, d);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const std::size_t ch = c0 + k;
      const double mean = saved_mean[ch], inv_std = saved_inv_std[ch];
      const double xhat = (v[k] - mean) * inv_std;
      const double scale = gamma[ch] * inv_std / count;
      const float step = static_cast<float>(scale * (count * g[k] - totals[ch * 2] - xhat * totals[ch * 2 + 1]));
      d[k] = accumulate ? d[k] + step : step;
    }
    store_values<F, V>(ValuesOut{dx, nullptr}, at, d);
  }
}

// launch(format, V) with each a std::integral_constant.
template <class Launch>
void with_vector(ValueFormat format, int vector, Launch&& launch) {
  with_format(format, [&](auto f) {
    if (vector == 8) launch(f, std::integral_constant<int, 8>{});
    else if (vector == 4) launch(f, std::integral_constant<int, 4>{});
    else launch(f, std::integral_constant<int, 1>{});
  });
}

// The partials' memory: the groups' counters, then the splits' lines, then one line of
// per-channel values.
struct PartialsMemory {
  unsigned* counters;
  double* lines;
  double* per_channel;
};
PartialsMemory partials_memory(void* memory, const ChannelSplit& s) {
  auto* bytes = static_cast<unsigned char*>(memory);
  auto* lines = reinterpret_cast<double*>(bytes + kCounterBytes);
  return {reinterpret_cast<unsigned*>(bytes), lines, lines + static_cast<std::size_t>(s.splits) * 2 * s.channels};
}

}  // namespace

std::size_t CudaBackend::channel_partials_bytes() const { return takes_channels_last() ? std::size_t{4} << 20 : 0; }

void CudaBackend::zero_channel_partials_counters() {
  if (channel_partials_) CNN_CHECK(cudaMemsetAsync(channel_partials_, 0, kCounterBytes, compute_));
}

void CudaBackend::batchnorm_training_channels_last(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y,
                                                   Tensor running_mean, Tensor running_var, float momentum,
                                                   float epsilon, Tensor saved_mean, Tensor saved_inv_std, bool relu,
                                                   const Tensor& residual) {
  if (x.elements() == 0) return;
  const int vector = vector_width(static_cast<std::size_t>(x.c()),
                                  {read_from(x), y.packed16 ? y.packed16 : y.data, read_from(residual)});
  const ChannelSplit s =
      split_channels("batchnorm_forward_training", x, vector, multiprocessors_, channel_partials_bytes());
  const PartialsMemory memory = partials_memory(channel_partials_, s);
  auto* scale_shift = reinterpret_cast<float*>(memory.per_channel);
  with_vector(product_format(), vector, [&](auto f, auto v) {
    constexpr ValueFormat F = decltype(f)::value;
    constexpr int V = decltype(v)::value;
    statistics_kernel<F, V><<<dim3(static_cast<unsigned>(s.splits), static_cast<unsigned>(s.groups)),
                              static_cast<unsigned>(s.threads), s.shared_bytes, compute_>>>(
        values_in(x), s, memory.lines, memory.counters, gamma.data, beta.data, running_mean.data, running_var.data,
        saved_mean.data, saved_inv_std.data, momentum, epsilon, scale_shift);
    check_launch("statistics_kernel");
    const std::size_t vectors = s.pixels * static_cast<std::size_t>(s.channels / V);
    normalise_pixels_kernel<F, V><<<blocks_for(vectors), kThreads, 0, compute_>>>(
        values_in(x), values_in(residual), values_out(y), scale_shift, s.pixels, s.channels, relu);
    check_launch("normalise_pixels_kernel");
  });
}

void CudaBackend::batchnorm_backward_channels_last(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                                   const Tensor& saved_mean, const Tensor& saved_inv_std, Tensor dx,
                                                   Tensor dgamma, Tensor dbeta, bool accumulate, const Tensor& relu_y,
                                                   Tensor dresidual, bool accumulate_residual) {
  if (x.elements() == 0) return;
  const int vector = vector_width(static_cast<std::size_t>(x.c()),
                                  {read_from(x), dy.data, dx.data, read_from(relu_y), dresidual.data});
  const ChannelSplit s = split_channels("batchnorm_backward", x, vector, multiprocessors_, channel_partials_bytes());
  const PartialsMemory memory = partials_memory(channel_partials_, s);
  with_vector(product_format(), vector, [&](auto f, auto v) {
    constexpr ValueFormat F = decltype(f)::value;
    constexpr int V = decltype(v)::value;
    gradient_sums_kernel<F, V><<<dim3(static_cast<unsigned>(s.splits), static_cast<unsigned>(s.groups)),
                                 static_cast<unsigned>(s.threads), s.shared_bytes, compute_>>>(
        values_in(x), dy.data, values_in(relu_y), saved_mean.data, saved_inv_std.data, dresidual.data,
        accumulate_residual, s, memory.lines, memory.counters, dgamma.data, dbeta.data, memory.per_channel);
    check_launch("gradient_sums_kernel");
    const std::size_t vectors = s.pixels * static_cast<std::size_t>(s.channels / V);
    input_gradient_kernel<F, V><<<blocks_for(vectors), kThreads, 0, compute_>>>(
        values_in(x), dy.data, values_in(relu_y), gamma.data, saved_mean.data, saved_inv_std.data,
        memory.per_channel, dx.data, accumulate, s.pixels, s.channels);
    check_launch("input_gradient_kernel");
  });
}

}  // namespace cnn::cuda
