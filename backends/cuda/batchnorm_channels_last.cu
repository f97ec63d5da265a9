// BatchNorm's own training kernels for channels-last images (Note [Channels-last images],
// tensor.hpp), forward and backward, with the ReLU and the residual add of the fused calls.
//
// Note [BatchNorm over channels-last images]
// A channel's values lie C apart, so the NCHW kernels' plan, a block (or a cluster) a channel
// (Note [One block a channel], batchnorm_kernels.cu), would read 2 bytes of every 32 it fetches.
// Here a pass is three launches over the pixels (N x H x W) in memory order:
//  1. The blocks split the pixels evenly, in order. A block's threads each take V adjacent
//     channels of every `rows`-th pixel of the block's share, so a warp reads consecutive bytes,
//     and sum them in double; the block's first row then adds the other rows' sums in row order
//     and writes the block's line of `partials` [blocks][C][2].
//  2. One thread a channel adds the blocks' lines in block order into the statistics (forward)
//     or the parameter gradients (backward), and leaves what step 3 needs per channel.
//  3. One thread a vector of V channels of a pixel writes the output.
// `partials` is the backend's (CudaBackend::channel_partials_, allocated with it and counted in
// library_reserved_bytes): no workspace, and nothing allocated in a step. The block count depends
// on the shape, the channels and the device alone, so a run gives the same bits every time.
// The arithmetic is the NCHW kernels', value for value; only the order of the sums differs.
#include <algorithm>
#include <cstddef>
#include <string>
#include <type_traits>

#include "backends/cuda/detail/check.hpp"
#include "backends/cuda/detail/cuda_backend_impl.hpp"
#include "backends/cuda/detail/grid_stride.cuh"
#include "backends/cuda/detail/values16.cuh"
#include <cnnengine/base/error.hpp>

namespace cnn::cuda {
namespace {

constexpr int kThreads = 256;
// The most channels a pixel's threads cover: `lanes` = C / V threads of V channels each.
constexpr int kMostLanes = kThreads;

// How step 1 splits the pixels: `lanes` threads a pixel (V channels each), `rows` pixels a round,
// `blocks` blocks of `threads` threads, each with `shared_bytes` of dynamic shared memory.
struct PixelSplit {
  std::size_t pixels;
  int channels, lanes, rows, blocks, threads;
  std::size_t shared_bytes;
  __device__ std::size_t begin(unsigned block) const { return pixels * block / static_cast<unsigned>(blocks); }
};

// x's split for `vector` channels a thread, on `multiprocessors`, with `partials_bytes` for the
// blocks' lines (and one line more, for step 2's results).
PixelSplit split_pixels(const char* call, const Tensor& x, int vector, int multiprocessors,
                        std::size_t partials_bytes) {
  const int channels = x.c(), lanes = channels / vector;
  if (lanes > kMostLanes)
    throw ConfigError(std::string(call) + ": " + x.shape.str() + " read " + std::to_string(vector) +
                      " channels at a time is more than " + std::to_string(kMostLanes) +
                      " vectors a pixel (channels-last BatchNorm takes up to " + std::to_string(kMostLanes * 8) +
                      " channels, in multiples of 8 beyond " + std::to_string(kMostLanes) + ")");
  PixelSplit split{};
  split.pixels = x.elements() / static_cast<std::size_t>(channels);
  split.channels = channels;
  split.lanes = lanes;
  split.rows = std::max(1, kThreads / lanes);
  // Several blocks a multiprocessor, each a full round of rows or more, and room in the partials.
  const std::size_t fit = partials_bytes / (2 * sizeof(double) * static_cast<std::size_t>(channels)) - 1;
  const std::size_t rounds = (split.pixels + static_cast<std::size_t>(split.rows) - 1) / split.rows;
  split.blocks = static_cast<int>(std::max<std::size_t>(
      1, std::min({std::size_t{4} * static_cast<std::size_t>(multiprocessors), rounds, fit})));
  split.threads = split.rows * lanes;
  split.shared_bytes = static_cast<std::size_t>(split.threads) * 2 * static_cast<std::size_t>(vector) * sizeof(double);
  return split;
}

// The block's sums a and b of its rows, added in row order by row 0 into `line` [C][2].
template <int V>
__device__ void write_block_sums(const PixelSplit& s, int lane, int row, double (&a)[V], double (&b)[V],
                                 double* line) {
  extern __shared__ double row_sums[];  // [rows * lanes][2 V]
  double* mine = row_sums + static_cast<std::size_t>(threadIdx.x) * 2 * V;
#pragma unroll
  for (int k = 0; k < V; ++k) mine[k] = a[k], mine[V + k] = b[k];
  __syncthreads();
  if (row != 0) return;
  for (int r = 1; r < s.rows; ++r) {
    const double* other = row_sums + static_cast<std::size_t>(r * s.lanes + lane) * 2 * V;
#pragma unroll
    for (int k = 0; k < V; ++k) a[k] += other[k], b[k] += other[V + k];
  }
#pragma unroll
  for (int k = 0; k < V; ++k) {
    line[(lane * V + k) * 2] = a[k];
    line[(lane * V + k) * 2 + 1] = b[k];
  }
}

// Step 1 forward: each block's sums of x and x^2 per channel.
template <ValueFormat F, int V>
__global__ void __launch_bounds__(kThreads) statistics_partials_kernel(ValuesIn x, PixelSplit s, double* partials) {
  const int lane = static_cast<int>(threadIdx.x) % s.lanes, row = static_cast<int>(threadIdx.x) / s.lanes;
  double sum[V] = {}, squares[V] = {};
  const std::size_t end = s.begin(blockIdx.x + 1);
  for (std::size_t p = s.begin(blockIdx.x) + row; p < end; p += s.rows) {
    float v[V];
    load_values<F, V>(x, p * s.channels + static_cast<std::size_t>(lane) * V, v);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      sum[k] += v[k];
      squares[k] += static_cast<double>(v[k]) * v[k];
    }
  }
  write_block_sums<V>(s, lane, row, sum, squares, partials + static_cast<std::size_t>(blockIdx.x) * 2 * s.channels);
}

// Step 2 forward: the statistics, as training_forward_kernel computes them, and each channel's
// scale and shift in `scale_shift` [2][C].
__global__ void statistics_kernel(const double* partials, PixelSplit s, const float* gamma, const float* beta,
                                  float* running_mean, float* running_var, float* saved_mean, float* saved_inv_std,
                                  float momentum, float epsilon, float* scale_shift) {
  const int ch = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (ch >= s.channels) return;
  double sum = 0, squares = 0;
  for (int b = 0; b < s.blocks; ++b) {
    sum += partials[(static_cast<std::size_t>(b) * s.channels + ch) * 2];
    squares += partials[(static_cast<std::size_t>(b) * s.channels + ch) * 2 + 1];
  }
  const double count = static_cast<double>(s.pixels);
  const double mean = sum / count;
  const double var = fmax(squares / count - mean * mean, 0.0);
  const float inv_std = static_cast<float>(1.0 / sqrt(var + epsilon));
  saved_mean[ch] = static_cast<float>(mean);
  saved_inv_std[ch] = inv_std;
  const double unbiased = count > 1 ? var * count / (count - 1) : var;
  running_mean[ch] = static_cast<float>((1.0 - momentum) * running_mean[ch] + momentum * mean);
  running_var[ch] = static_cast<float>((1.0 - momentum) * running_var[ch] + momentum * unbiased);
  const float scale = gamma[ch] * inv_std;
  scale_shift[ch] = scale;
  scale_shift[s.channels + ch] = fmaf(-static_cast<float>(mean), scale, beta[ch]);
}

// Step 3 forward: y = x * scale + shift, plus the residual, through the ReLU, as
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

// Step 1 backward: each block's sums of the gradient g and of g * xhat per channel; the residual's
// gradient (g, or added to it) written on the way, as training_backward_kernel writes it.
template <ValueFormat F, int V>
__global__ void __launch_bounds__(kThreads)
    gradient_partials_kernel(ValuesIn x, const float* dy, ValuesIn relu_y, const float* saved_mean,
                             const float* saved_inv_std, float* dresidual, bool accumulate_residual, PixelSplit s,
                             double* partials) {
  const int lane = static_cast<int>(threadIdx.x) % s.lanes, row = static_cast<int>(threadIdx.x) / s.lanes;
  double mean[V], inv_std[V], sum_dy[V] = {}, sum_dy_xhat[V] = {};
#pragma unroll
  for (int k = 0; k < V; ++k) mean[k] = saved_mean[lane * V + k], inv_std[k] = saved_inv_std[lane * V + k];
  const std::size_t end = s.begin(blockIdx.x + 1);
  for (std::size_t p = s.begin(blockIdx.x) + row; p < end; p += s.rows) {
    const std::size_t at = p * s.channels + static_cast<std::size_t>(lane) * V;
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
  write_block_sums<V>(s, lane, row, sum_dy, sum_dy_xhat,
                      partials + static_cast<std::size_t>(blockIdx.x) * 2 * s.channels);
}

// Step 2 backward: the parameter gradients (added to) and each channel's sums in `totals` [C][2].
__global__ void gradient_totals_kernel(const double* partials, PixelSplit s, float* dgamma, float* dbeta,
                                       double* totals) {
  const int ch = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (ch >= s.channels) return;
  double sum_dy = 0, sum_dy_xhat = 0;
  for (int b = 0; b < s.blocks; ++b) {
    sum_dy += partials[(static_cast<std::size_t>(b) * s.channels + ch) * 2];
    sum_dy_xhat += partials[(static_cast<std::size_t>(b) * s.channels + ch) * 2 + 1];
  }
  if (dgamma) dgamma[ch] += static_cast<float>(sum_dy_xhat);
  if (dbeta) dbeta[ch] += static_cast<float>(sum_dy);
  totals[ch * 2] = sum_dy;
  totals[ch * 2 + 1] = sum_dy_xhat;
}

// Step 3 backward: dx, written or added to, as training_backward_kernel computes it.
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

const void* read_from(const Tensor& t) { return t.packed16 ? t.packed16 : t.data; }

// launch(format, V) with each a std::integral_constant.
template <class Launch>
void with_vector(ValueFormat format, int vector, Launch&& launch) {
  with_format(format, [&](auto f) {
    if (vector == 8) launch(f, std::integral_constant<int, 8>{});
    else if (vector == 4) launch(f, std::integral_constant<int, 4>{});
    else launch(f, std::integral_constant<int, 1>{});
  });
}

unsigned channel_blocks_for(int channels) { return static_cast<unsigned>((channels + kThreads - 1) / kThreads); }

}  // namespace

std::size_t CudaBackend::channel_partials_bytes() const {
  return takes_channels_last() ? std::size_t{4} << 20 : 0;
}

void CudaBackend::batchnorm_training_channels_last(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y,
                                                   Tensor running_mean, Tensor running_var, float momentum,
                                                   float epsilon, Tensor saved_mean, Tensor saved_inv_std, bool relu,
                                                   const Tensor& residual) {
  if (x.elements() == 0) return;
  const int vector = vector_width(static_cast<std::size_t>(x.c()),
                                  {read_from(x), y.packed16 ? y.packed16 : y.data, read_from(residual)});
  const PixelSplit s = split_pixels("batchnorm_forward_training", x, vector, multiprocessors_, channel_partials_bytes());
  auto* partials = static_cast<double*>(channel_partials_);
  auto* scale_shift = reinterpret_cast<float*>(partials + static_cast<std::size_t>(s.blocks) * 2 * s.channels);
  with_vector(product_format(), vector, [&](auto f, auto v) {
    constexpr ValueFormat F = decltype(f)::value;
    constexpr int V = decltype(v)::value;
    statistics_partials_kernel<F, V><<<static_cast<unsigned>(s.blocks), static_cast<unsigned>(s.threads),
                                       s.shared_bytes, compute_>>>(values_in(x), s, partials);
    check_launch("statistics_partials_kernel");
    statistics_kernel<<<channel_blocks_for(s.channels), kThreads, 0, compute_>>>(
        partials, s, gamma.data, beta.data, running_mean.data, running_var.data, saved_mean.data,
        saved_inv_std.data, momentum, epsilon, scale_shift);
    check_launch("statistics_kernel");
    const std::size_t vectors = s.pixels * static_cast<std::size_t>(s.lanes);
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
  const PixelSplit s = split_pixels("batchnorm_backward", x, vector, multiprocessors_, channel_partials_bytes());
  auto* partials = static_cast<double*>(channel_partials_);
  double* totals = partials + static_cast<std::size_t>(s.blocks) * 2 * s.channels;
  with_vector(product_format(), vector, [&](auto f, auto v) {
    constexpr ValueFormat F = decltype(f)::value;
    constexpr int V = decltype(v)::value;
    gradient_partials_kernel<F, V><<<static_cast<unsigned>(s.blocks), static_cast<unsigned>(s.threads),
                                     s.shared_bytes, compute_>>>(values_in(x), dy.data, values_in(relu_y),
                                                                     saved_mean.data, saved_inv_std.data,
                                                                     dresidual.data, accumulate_residual, s,
                                                                     partials);
    check_launch("gradient_partials_kernel");
    gradient_totals_kernel<<<channel_blocks_for(s.channels), kThreads, 0, compute_>>>(partials, s, dgamma.data,
                                                                                       dbeta.data, totals);
    check_launch("gradient_totals_kernel");
    const std::size_t vectors = s.pixels * static_cast<std::size_t>(s.lanes);
    input_gradient_kernel<F, V><<<blocks_for(vectors), kThreads, 0, compute_>>>(
        values_in(x), dy.data, values_in(relu_y), gamma.data, saved_mean.data, saved_inv_std.data, totals, dx.data,
        accumulate, s.pixels, s.channels);
    check_launch("input_gradient_kernel");
  });
}

}  // namespace cnn::cuda
