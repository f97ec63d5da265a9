// BatchNorm's own kernels: the output from saved statistics (a recomputation during backward:
// cuDNN's inference call would take a variance, not the saved 1 / sqrt(variance + epsilon), and
// change its rounding), and every call where a value is in 16 bits (Tensor::packed16): training's
// forward and backward and inference. A step on a 16-bit plan hands BatchNorm its input and output
// as it stores them (Layer::packed_values), so these kernels read the 16-bit values where cuDNN's
// float batch norm would need float copies of them.
//
// Note [One block a channel]
// Training's forward and backward each give a channel one block, or on Hopper and later, where
// the channels are fewer than twice the multiprocessors, a cluster of up to 8 blocks
// (channel_blocks): one block a channel left most of an H200 idle on resnet18's 64 channels. Each
// block sums its share of the channel over N, H and W in double, in a fixed tree (block_sums.cuh);
// a cluster's blocks then add the blocks' sums in rank order through each other's shared memory
// (channel_sums), so every block holds the same totals and a run gives the same bits every time.
// Each block then goes over its share again to write its output. No partial sums leave the
// cluster, so the calls need no workspace. The values are read 8 (or 4) at a time where the plane
// and the pointers allow it (vector_width), which keeps enough bytes in flight for a block to pull
// its share at a good part of the memory's speed.
// The arithmetic is the CPU backend's (backends/cpu/batchnorm_channel.cpp): the statistics as
// detail/batchnorm_statistics.cuh computes them, y = x * scale + shift with float scale and shift;
// the input gradient in double.
#include <cooperative_groups.h>

#include <algorithm>
#include <cstddef>
#include <type_traits>
#include <utility>
#include <vector>

#include "backends/cuda/detail/architectures.hpp"
#include "backends/cuda/detail/batchnorm_statistics.cuh"
#include "backends/cuda/detail/block_sums.cuh"
#include "backends/cuda/detail/check.hpp"
#include "backends/cuda/detail/cuda_backend_impl.hpp"
#include "backends/cuda/detail/grid_stride.cuh"
#include "backends/cuda/detail/values16.cuh"

namespace cnn::cuda {
namespace {

// Threads a block: more where a channel has many values to read.
constexpr int kFewThreads = 256, kManyThreads = 512;
constexpr std::size_t kManyValues = std::size_t{1} << 15;

// Channel ch's values V at a time: `samples` planes of `plane` values, `channels` planes apart.
template <int V>
struct ChannelVectors {
  std::size_t channels, plane, per_plane, count;  // per_plane = plane / V; count = samples * per_plane

  __device__ std::size_t at(std::size_t ch, std::size_t j) const {
    const std::size_t n = j / per_plane;
    return (n * channels + ch) * plane + (j - n * per_plane) * V;
  }
  __device__ double values() const { return static_cast<double>(count) * V; }
};

template <int V>
ChannelVectors<V> channel_vectors(const Tensor& x) {
  const auto plane = static_cast<std::size_t>(x.h()) * static_cast<std::size_t>(x.w());
  return {static_cast<std::size_t>(x.c()), plane, plane / V, static_cast<std::size_t>(x.n()) * (plane / V)};
}

// Each thread reads kUnroll vectors of each tensor before it uses them, 8 values or 4 where they
// come one at a time: with two blocks of 512 threads, or four of 256, on a multiprocessor
// (kBlocksPerMultiprocessor, which caps a thread at 64 registers) the bytes in flight that a
// channel's blocks need (Note [One block a channel]). A thread takes vectors t, t + kThreads,
// t + 2 kThreads, ... whatever kUnroll, so it sums in the same order either way.
template <int V>
constexpr int kUnroll = V == 8 ? 1 : V == 4 ? 2 : 4;
template <int kThreads>
constexpr int kBlocksPerMultiprocessor = 1024 / kThreads;
// The most blocks a channel gets: the largest cluster every Hopper part runs.
constexpr int kMostChannelBlocks = 8;

// The vectors a thread takes in one round: first, first + kThreads, ..., those below `end`.
template <int V, int kThreads>
__device__ int vectors_in_round(std::size_t first, std::size_t end) {
  const std::size_t left = (end - first + kThreads - 1) / kThreads;
  return left < kUnroll<V> ? static_cast<int>(left) : kUnroll<V>;
}

// This block's channel and its share of the channel's `count` vectors, [begin, end): the
// channel's blocks (`blocks`, one cluster) split them evenly, in rank order.
struct ChannelShare {
  std::size_t ch, rank, begin, end;
};
__device__ ChannelShare channel_share(int blocks, std::size_t count) {
  const std::size_t rank = blockIdx.x % static_cast<unsigned>(blocks);
  return {blockIdx.x / static_cast<unsigned>(blocks), rank, count * rank / blocks, count * (rank + 1) / blocks};
}

// The channel's sums of a and b over its blocks (Note [One block a channel]): each block's sum in
// a fixed tree, then the blocks' in rank order, read from each block's shared memory. Every
// thread of every block of the channel gets the same bits.
template <int kThreads>
__device__ void channel_sums(int blocks, double& a, double& b) {
  block_sums<kThreads>(a, b);
  if (blocks == 1) return;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  __shared__ double block_total[2];
  if (threadIdx.x == 0) block_total[0] = a, block_total[1] = b;
  cluster.sync();
  a = 0, b = 0;
  for (int rank = 0; rank < blocks; ++rank) {
    const double* total = cluster.map_shared_rank(block_total, rank);
    a += total[0];
    b += total[1];
  }
  cluster.sync();  // no block leaves while another still reads its total
#else
  __trap();  // channel_blocks gives a channel one block where clusters cannot run
#endif
}

// f(u, k) for value k of each vector u a round holds, in order (the sums' order is the results').
template <int V, typename Visit>
__device__ __forceinline__ void each_value_of_round(int round, Visit&& f) {
#pragma unroll
  for (int u = 0; u < kUnroll<V>; ++u)
    if (u < round)
#pragma unroll
      for (int k = 0; k < V; ++k) f(u, k);
}

// Where vector u of the round from `first` sits, and the round's vectors of `in` read into v.
template <int V, int kThreads>
__device__ std::size_t round_at(const ChannelVectors<V>& layout, std::size_t ch, std::size_t first, int u) {
  return layout.at(ch, first + static_cast<std::size_t>(u) * kThreads);
}
template <ValueFormat F, int V, int kThreads>
__device__ void load_round(const ValuesIn& in, const ChannelVectors<V>& layout, std::size_t ch, std::size_t first,
                           int round, float (&v)[kUnroll<V>][V]) {
#pragma unroll
  for (int u = 0; u < kUnroll<V>; ++u)
    if (u < round) load_values<F, V>(in, round_at<V, kThreads>(layout, ch, first, u), v[u]);
}

// The ReLU's backward on a round of gradients g, from its output y: g where y > 0, else 0, as
// relu_backward16_kernel computes it.
template <ValueFormat F, int V, int kThreads>
__device__ void mask_round(const ValuesIn& y, const ChannelVectors<V>& layout, std::size_t ch, std::size_t first,
                           int round, float (&g)[kUnroll<V>][V]) {
  float out[kUnroll<V>][V];
  load_round<F, V, kThreads>(y, layout, ch, first, round, out);
  each_value_of_round<V>(round, [&](int u, int k) { g[u][k] = out[u][k] > 0.0f ? g[u][k] : 0.0f; });
}

// The residual's gradient from a round of the ReLU's input gradient g, as copy_or_add writes it:
// g, or added to what it holds (Note [BatchNorm, add and ReLU in one pass], step_plan.cpp).
template <ValueFormat F, int V, int kThreads>
__device__ void write_residual_gradient(float* dresidual, bool accumulate, const ChannelVectors<V>& layout,
                                        std::size_t ch, std::size_t first, int round, const float (&g)[kUnroll<V>][V]) {
  float d[kUnroll<V>][V];
  if (accumulate) load_round<F, V, kThreads>(ValuesIn{dresidual, nullptr}, layout, ch, first, round, d);
  each_value_of_round<V>(round, [&](int u, int k) { d[u][k] = accumulate ? d[u][k] + g[u][k] : g[u][k]; });
#pragma unroll
  for (int u = 0; u < kUnroll<V>; ++u)
    if (u < round) store_values<F, V>(ValuesOut{dresidual, nullptr}, round_at<V, kThreads>(layout, ch, first, u), d[u]);
}

template <ValueFormat F, int V, int kThreads>
__global__ void __launch_bounds__(kThreads, kBlocksPerMultiprocessor<kThreads>)
    training_forward_kernel(ChannelVectors<V> layout, int blocks, ValuesIn x, ValuesIn residual, ValuesOut y,
                            const float* gamma, const float* beta, float* running_mean, float* running_var,
                            float* saved_mean, float* saved_inv_std, float momentum, float epsilon, bool relu) {
  const ChannelShare share = channel_share(blocks, layout.count);
  const std::size_t ch = share.ch;
  constexpr std::size_t kRound = std::size_t{kThreads} * kUnroll<V>;
  double sum = 0, squares = 0;
  for (std::size_t first = share.begin + threadIdx.x; first < share.end; first += kRound) {
    const int round = vectors_in_round<V, kThreads>(first, share.end);
    float v[kUnroll<V>][V];
    load_round<F, V, kThreads>(x, layout, ch, first, round, v);
    each_value_of_round<V>(round, [&](int u, int k) {
      sum += v[u][k];
      squares += static_cast<double>(v[u][k]) * v[u][k];
    });
  }
  channel_sums<kThreads>(blocks, sum, squares);
  const double count = layout.values();
  const BatchStatistics stats = batch_statistics(sum, squares, count, epsilon);
  if (threadIdx.x == 0 && share.rank == 0)
    record_statistics(ch, stats, count, momentum, running_mean, running_var, saved_mean, saved_inv_std);
  const float scale = gamma[ch] * stats.inv_std;
  const float shift = fmaf(-static_cast<float>(stats.mean), scale, beta[ch]);  // as normalise_kernel's, to the bit
  const bool add = residual.wide || residual.packed;
  for (std::size_t first = share.begin + threadIdx.x; first < share.end; first += kRound) {
    const int round = vectors_in_round<V, kThreads>(first, share.end);
    float v[kUnroll<V>][V], r[kUnroll<V>][V];
    load_round<F, V, kThreads>(x, layout, ch, first, round, v);
    if (add) load_round<F, V, kThreads>(residual, layout, ch, first, round, r);
#pragma unroll
    for (int u = 0; u < kUnroll<V>; ++u) {
      if (u >= round) break;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        v[u][k] = fmaf(v[u][k], scale, shift);
        // The add reads BatchNorm's output as stored, as add16_kernel does (Note [BatchNorm, add
        // and ReLU in one pass], step_plan.cpp).
        if (add) v[u][k] = (y.packed ? widened<F>(narrowed<F>(v[u][k])) : v[u][k]) + r[u][k];
        // Rounding keeps a value's sign, or makes it a zero: as relu_forward16_kernel on the
        // rounded output, to the bit (Note [BatchNorm and ReLU in one pass], step_plan.cpp).
        if (relu) v[u][k] = v[u][k] > 0.0f ? v[u][k] : 0.0f;
      }
      store_values<F, V>(y, round_at<V, kThreads>(layout, ch, first, u), v[u]);
    }
  }
}

template <ValueFormat F, int V, int kThreads>
__global__ void __launch_bounds__(kThreads, kBlocksPerMultiprocessor<kThreads>)
    training_backward_kernel(ChannelVectors<V> layout, int blocks, ValuesIn x, const float* dy, ValuesIn relu_y,
                             const float* gamma, const float* saved_mean, const float* saved_inv_std, float* dx,
                             float* dgamma, float* dbeta, bool accumulate, float* dresidual,
                             bool accumulate_residual) {
  const ChannelShare share = channel_share(blocks, layout.count);
  const std::size_t ch = share.ch;
  constexpr std::size_t kRound = std::size_t{kThreads} * kUnroll<V>;
  const double mean = saved_mean[ch], inv_std = saved_inv_std[ch];
  const ValuesIn gradient{dy, nullptr};
  const bool relu = relu_y.wide || relu_y.packed;  // the gradient comes through a ReLU
  double sum_dy = 0, sum_dy_xhat = 0;
  for (std::size_t first = share.begin + threadIdx.x; first < share.end; first += kRound) {
    const int round = vectors_in_round<V, kThreads>(first, share.end);
    float v[kUnroll<V>][V], g[kUnroll<V>][V];
    load_round<F, V, kThreads>(x, layout, ch, first, round, v);
    load_round<F, V, kThreads>(gradient, layout, ch, first, round, g);
    if (relu) mask_round<F, V, kThreads>(relu_y, layout, ch, first, round, g);
    if (dresidual) write_residual_gradient<F, V, kThreads>(dresidual, accumulate_residual, layout, ch, first, round, g);
    each_value_of_round<V>(round, [&](int u, int k) {
      sum_dy += g[u][k];
      sum_dy_xhat += static_cast<double>(g[u][k]) * ((v[u][k] - mean) * inv_std);
    });
  }
  channel_sums<kThreads>(blocks, sum_dy, sum_dy_xhat);
  if (threadIdx.x == 0 && share.rank == 0) {
    if (dgamma) dgamma[ch] += static_cast<float>(sum_dy_xhat);
    if (dbeta) dbeta[ch] += static_cast<float>(sum_dy);
  }
  const double count = layout.values();
  const double scale = gamma[ch] * inv_std / count;
  const ValuesIn written{dx, nullptr};
  const ValuesOut out{dx, nullptr};
  for (std::size_t first = share.begin + threadIdx.x; first < share.end; first += kRound) {
    const int round = vectors_in_round<V, kThreads>(first, share.end);
    float v[kUnroll<V>][V], g[kUnroll<V>][V], d[kUnroll<V>][V];
    load_round<F, V, kThreads>(x, layout, ch, first, round, v);
    load_round<F, V, kThreads>(gradient, layout, ch, first, round, g);
    if (relu) mask_round<F, V, kThreads>(relu_y, layout, ch, first, round, g);
    if (accumulate) load_round<F, V, kThreads>(written, layout, ch, first, round, d);
#pragma unroll
    for (int u = 0; u < kUnroll<V>; ++u) {
      if (u >= round) break;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const double xhat = (v[u][k] - mean) * inv_std;
        const float step = static_cast<float>(scale * (count * g[u][k] - sum_dy - xhat * sum_dy_xhat));
        d[u][k] = accumulate ? d[u][k] + step : step;
      }
      store_values<F, V>(out, round_at<V, kThreads>(layout, ch, first, u), d[u]);
    }
  }
}

// y = x * scale + shift per channel, scale = gamma * inv_std (saved statistics) or gamma /
// sqrt(var + epsilon) (running ones, as the CPU's inference computes it), shift = beta - mean * scale:
// from saved statistics, the bits training's forward wrote, so that a recomputation rounds alike.
template <ValueFormat F>
__global__ void normalise_kernel(ValuesIn x, ValuesOut y, const float* gamma, const float* beta, const float* mean,
                                 const float* spread, bool spread_is_variance, float epsilon, std::size_t n,
                                 std::size_t channels, std::size_t plane) {
  CNN_FOR_EACH_ELEMENT(i, n) {
    const std::size_t ch = (i / plane) % channels;
    const float scale = spread_is_variance ? gamma[ch] / sqrtf(spread[ch] + epsilon) : gamma[ch] * spread[ch];
    y.set<F>(i, fmaf(x.at<F>(i), scale, fmaf(-mean[ch], scale, beta[ch])));
  }
}

// How many blocks each of `channels` channels of `vectors` vectors gets (Note [One block a
// channel]): one, or where clusters run and the channels leave multiprocessors idle, enough for
// about two blocks a multiprocessor, each with a full round (`round` vectors) or more.
int channel_blocks(int compute_major, int multiprocessors, std::size_t channels, std::size_t vectors,
                   std::size_t round) {
  static const bool built_for_clusters = [] {
    const std::vector<int> archs = compiled_architectures();
    return std::any_of(archs.begin(), archs.end(), [](int a) { return a >= 90; });
  }();
  if (compute_major < 9 || !built_for_clusters || channels == 0) return 1;
  const std::size_t wanted = (2 * static_cast<std::size_t>(multiprocessors) + channels - 1) / channels;
  const std::size_t rounds = vectors / round;
  return static_cast<int>(std::clamp<std::size_t>(std::min(wanted, rounds), 1, kMostChannelBlocks));
}

// Launches `kernel` with `blocks` blocks a channel, those of a channel one cluster.
template <class... Parameters, class... Arguments>
void launch_per_channel(void (*kernel)(Parameters...), const char* name, int channels, int blocks, int threads,
                        cudaStream_t stream, Arguments&&... arguments) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(channels) * static_cast<unsigned>(blocks));
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.stream = stream;
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = static_cast<unsigned>(blocks);
  cluster.val.clusterDim.y = 1;
  cluster.val.clusterDim.z = 1;
  if (blocks > 1) {
    config.attrs = &cluster;
    config.numAttrs = 1;
  }
  check(cudaLaunchKernelEx(&config, kernel, std::forward<Arguments>(arguments)...), name);
}

// launch(format, V, threads), each a std::integral_constant, for a channel of `per_channel` values
// read `vector` at a time.
template <class Launch>
void per_channel_launch(ValueFormat format, int vector, std::size_t per_channel, Launch&& launch) {
  auto with_threads = [&](auto f, auto v) {
    if (per_channel >= kManyValues) launch(f, v, std::integral_constant<int, kManyThreads>{});
    else launch(f, v, std::integral_constant<int, kFewThreads>{});
  };
  with_format(format, [&](auto f) {
    if (vector == 8) with_threads(f, std::integral_constant<int, 8>{});
    else if (vector == 4) with_threads(f, std::integral_constant<int, 4>{});
    else with_threads(f, std::integral_constant<int, 1>{});
  });
}

}  // namespace

void CudaBackend::do_batchnorm_forward_saved(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                             const Tensor& saved_mean, const Tensor& saved_inv_std, Tensor y) {
  activate();
  check_saved_statistics_call("batchnorm_forward_saved", x, gamma, beta, saved_mean, saved_inv_std, y);
  batchnorm_normalise(x, gamma, beta, saved_mean, saved_inv_std, false, 0.0f, y);
  touched(x, packed_range(x), gamma, beta, saved_mean, saved_inv_std, y, packed_range(y));
}

void CudaBackend::batchnorm_training16(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y,
                                       Tensor running_mean, Tensor running_var, float momentum, float epsilon,
                                       Tensor saved_mean, Tensor saved_inv_std, bool relu, const Tensor& residual) {
  if (x.shape.channels_last)
    return batchnorm_training_channels_last(x, gamma, beta, y, running_mean, running_var, momentum, epsilon,
                                            saved_mean, saved_inv_std, relu, residual);
  if (x.elements() == 0) return;
  const auto plane = static_cast<std::size_t>(x.h()) * static_cast<std::size_t>(x.w());
  const int vector = vector_width(plane, {read_from(x), y.packed16 ? y.packed16 : y.data, read_from(residual)});
  per_channel_launch(product_format(), vector, x.elements() / static_cast<std::size_t>(x.c()),
                     [&](auto f, auto v, auto threads) {
                       constexpr ValueFormat F = decltype(f)::value;
                       constexpr int V = decltype(v)::value, kThreads = decltype(threads)::value;
                       const ChannelVectors<V> layout = channel_vectors<V>(x);
                       const int blocks = channel_blocks(compute_major_, multiprocessors_, layout.channels,
                                                         layout.count, std::size_t{kThreads} * kUnroll<V>);
                       launch_per_channel(training_forward_kernel<F, V, kThreads>, "training_forward_kernel",
                                          x.c(), blocks, kThreads, compute_, layout, blocks, values_in(x),
                                          values_in(residual), values_out(y), gamma.data, beta.data, running_mean.data,
                                          running_var.data, saved_mean.data, saved_inv_std.data, momentum,
                                          epsilon, relu);
                     });
}

void CudaBackend::batchnorm_backward16(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                       const Tensor& saved_mean, const Tensor& saved_inv_std, Tensor dx,
                                       Tensor dgamma, Tensor dbeta, bool accumulate, const Tensor& relu_y,
                                       Tensor dresidual, bool accumulate_residual) {
  if (x.shape.channels_last)
    return batchnorm_backward_channels_last(x, dy, gamma, saved_mean, saved_inv_std, dx, dgamma, dbeta, accumulate,
                                            relu_y, dresidual, accumulate_residual);
  if (x.elements() == 0) return;
  const auto plane = static_cast<std::size_t>(x.h()) * static_cast<std::size_t>(x.w());
  const int vector = vector_width(plane, {read_from(x), dy.data, dx.data, read_from(relu_y), dresidual.data});
  per_channel_launch(product_format(), vector, x.elements() / static_cast<std::size_t>(x.c()),
                     [&](auto f, auto v, auto threads) {
                       constexpr ValueFormat F = decltype(f)::value;
                       constexpr int V = decltype(v)::value, kThreads = decltype(threads)::value;
                       const ChannelVectors<V> layout = channel_vectors<V>(x);
                       const int blocks = channel_blocks(compute_major_, multiprocessors_, layout.channels,
                                                         layout.count, std::size_t{kThreads} * kUnroll<V>);
                       launch_per_channel(training_backward_kernel<F, V, kThreads>, "training_backward_kernel",
                                          x.c(), blocks, kThreads, compute_, layout, blocks, values_in(x),
                                          dy.data, values_in(relu_y), gamma.data, saved_mean.data,
                                          saved_inv_std.data, dx.data, dgamma.data, dbeta.data, accumulate,
                                          dresidual.data, accumulate_residual);
                     });
}

void CudaBackend::batchnorm_normalise(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& mean,
                                      const Tensor& spread, bool spread_is_variance, float epsilon, Tensor y) {
  const std::size_t n = x.elements();
  if (n == 0) return;
  const auto channels = static_cast<std::size_t>(x.c());
  // Channels last, an element's channel is its index modulo C: a plane of 1.
  const std::size_t plane =
      x.shape.channels_last ? 1 : static_cast<std::size_t>(x.h()) * static_cast<std::size_t>(x.w());
  with_format(products16() ? product_format() : ValueFormat::bf16, [&](auto f) {
    normalise_kernel<decltype(f)::value><<<blocks_for(n), 256, 0, compute_>>>(
        values_in(x), values_out(y), gamma.data, beta.data, mean.data, spread.data, spread_is_variance, epsilon, n,
        channels, plane);
  });
  check_launch("normalise_kernel");
}

}  // namespace cnn::cuda
