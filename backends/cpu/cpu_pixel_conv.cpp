// The convolution of a few input channels with its vectors along the pixels
// (backends/cpu/detail/pixel_conv.hpp).
//
// Note [Vectors along the pixels]: a network's first convolution reads an image of 1 to 3
// channels. The direct kernels run their vectors along 16 channels, which such a layer does not
// have, and im2col + GEMM multiplies a product only 9 to 27 deep, at 18% to 50% of the peak
// (conv_peak: resnet18's 3 -> 64 on 64 x 64, resnet's 1 -> 16 on 28 x 28). Here a vector holds 16
// neighbouring pixels of one output row, in NCHW as they are: a kernel tap (one input channel,
// kernel row and kernel column) reads a run of the padded input row shifted by the tap, so neither
// the image nor the output is reordered.
// - Forward: a tile of 8 outputs x 3 runs of 16 pixels sums in 24 registers; per tap it loads the
//   3 runs of the input and broadcasts 8 weights, 24 fused multiply-adds for 11 loads. Each output
//   row is cut into runs of 16, the last under a mask, and a tile takes the next three runs
//   wherever they are (a 28-wide row is two runs, so a tile spans rows). Each output's sum is one
//   chain over the taps in order, from zero, then y + sum + bias: the same bits on any thread count.
// - Backward-filter: dw[o][tap] sums dy[o][p] x[tap's shift of p] over the pixels p. A tile of 8
//   outputs x 3 taps holds 24 vectors of 16 partial sums (a lane each of the run's pixels) and runs
//   along the output rows: per run of 16 pixels, 3 shifted input runs and 8 vectors of dy, 24
//   fused multiply-adds for 11 loads, a short run's lanes zero in both. The taps go in tiles of 3
//   (or as evenly as they split: 50 taps in 17 tiles of 3 and 2). dy goes in chunks of rows (the
//   whole map where it fits 256 KB of the L2 cache) that the tiles of taps pass over in turn: the
//   first reads the chunk from memory, the others fetch the next chunk as they run, since the
//   layer reads all of dy once (resnet18 at 64: 64 MiB), and waiting on it cost a fifth of the
//   time. Each thread sums its whole images into its partial gradient; at the end a value's 16
//   lanes are added in lane order and the threads' partials in thread order (as the other
//   backward-filters, the bits follow the thread count).
// The image is copied once an image with its padding written out (and 16 floats past its end for
// the last run's overreach, which the masks drop). At stride 2 a run's 16 outputs read every other
// input column, so each padded row is kept as its even columns, then its odd ones (split 32 values
// at a time by two permutes): a tap's run is again 16 neighbours, in the half of its column's
// parity. The ImageNet stem (7x7 at stride 2) runs forward this way, 1.25x the blocked direct
// kernel; its backward-filter, 147 taps over dy in 49 tiles, was 0.87x the kernel along the outputs
// (Note [The stem's backward-filter]) and stays there.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>
#include <string>

#include "backends/cpu/detail/cpu_isa.hpp"
#include "backends/cpu/detail/gemm.hpp"
#include "backends/cpu/detail/parallel.hpp"
#include "backends/cpu/detail/pixel_conv.hpp"
#include "backends/cpu/detail/workspace_check.hpp"

namespace cnn::cpu {
namespace {

constexpr std::size_t kLanes = 16;        // floats a vector: pixels a run
constexpr std::size_t kMaxChannels = 15;  // input channels
constexpr std::size_t kMaxKernel = 7;
constexpr std::size_t kMaxTaps = kMaxChannels * kMaxKernel * kMaxKernel;
constexpr std::size_t kTileOuts = 8;             // forward: outputs a tile
constexpr std::size_t kTileRuns = 3;             // forward: runs of 16 pixels a tile
constexpr std::size_t kFilterOuts = 8;           // backward-filter: outputs a tile
constexpr std::size_t kFilterTaps = 3;           // backward-filter: taps a tile, at most
constexpr std::size_t kChunkBytes = 256 * 1024;  // backward-filter: a chunk's rows of dy for a tile's outputs

// A convolution at stride 1 or 2. At stride 2 each padded row is kept as its even columns, then
// its odd ones (each half `half()` floats), so that a tap's run of 16 outputs reads 16 neighbours.
struct Geometry {
  std::size_t cin, cout, h, w, k, pad, stride;
  std::size_t hp() const { return h + 2 * pad; }
  std::size_t wp() const { return w + 2 * pad; }
  std::size_t hout() const { return (hp() - k) / stride + 1; }
  std::size_t wout() const { return (wp() - k) / stride + 1; }
  std::size_t pixels() const { return hout() * wout(); }
  std::size_t half() const { return (wp() + 1) / 2; }
  std::size_t row_floats() const { return stride == 1 ? wp() : 2 * half(); }  // a padded row
  std::size_t row_step() const { return stride * row_floats(); }  // from an output row's input to the next's
  std::size_t plane() const { return hp() * row_floats(); }
  std::size_t taps() const { return cin * k * k; }
  std::size_t runs_a_row() const { return (wout() + kLanes - 1) / kLanes; }
  std::size_t padded_floats() const { return aligned_floats(cin * plane() + kLanes); }
  // Where padded column j of a row lies in it.
  std::size_t column(std::size_t j) const { return stride == 1 ? j : (j % 2) * half() + j / 2; }
};

Geometry geometry(const Conv2dDesc& d, const Shape& x) {
  const auto size = [](int v) { return static_cast<std::size_t>(v); };
  return {size(x[1]), size(d.out_channels), size(x[2]), size(x[3]), size(d.kernel_h), size(d.padding), size(d.stride)};
}

void require_takes(const Conv2dDesc& d, const Shape& x, const char* what) {
  if (!pixel_conv_takes(d, x))
    throw std::logic_error(std::string(what) + ": the pixel-vector passes take no such convolution of " + x.str());
}

// Where each tap's run starts, from its output pixel's: c * plane + i * row + column(j).
using TapOffsets = std::array<std::size_t, kMaxTaps>;

TapOffsets tap_offsets(const Geometry& g) {
  TapOffsets offsets{};
  std::size_t t = 0;
  for (std::size_t c = 0; c < g.cin; ++c)
    for (std::size_t i = 0; i < g.k; ++i)
      for (std::size_t j = 0; j < g.k; ++j) offsets[t++] = c * g.plane() + i * g.row_floats() + g.column(j);
  return offsets;
}

// A row of w values into a stride-2 padded row from padded column `pad`: each value to its
// column's half, 32 at a time split into even and odd ones.
CNN_TARGET_AVX512 void split_row_avx512(const Geometry& g, const float* from, float* row) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  // Values at even q go to padded column q + pad: the even half where pad is even.
  float* to_even = row + g.column(g.pad);
  float* to_odd = row + g.column(g.pad + 1);
  for (std::size_t q = 0; q < g.w; q += 2 * kLanes) {
    const std::size_t count = std::min(2 * kLanes, g.w - q);
    const auto low = static_cast<__mmask16>((1u << std::min(kLanes, count)) - 1);
    const auto high = static_cast<__mmask16>((1u << (count > kLanes ? count - kLanes : 0)) - 1);
    const __m512 a = _mm512_maskz_loadu_ps(low, from + q), b = _mm512_maskz_loadu_ps(high, from + q + kLanes);
    const auto evens = static_cast<__mmask16>((1u << ((count + 1) / 2)) - 1);
    const auto odds = static_cast<__mmask16>((1u << (count / 2)) - 1);
    _mm512_mask_storeu_ps(to_even + q / 2, evens, _mm512_permutex2var_ps(a, even, b));
    _mm512_mask_storeu_ps(to_odd + q / 2, odds, _mm512_permutex2var_ps(a, odd, b));
  }
}

// One image [cin][h][w] into [cin][hp][row], its border and the floats past its end zero.
void pad_image(const Geometry& g, const float* x, float* padded) {
  std::memset(padded, 0, g.padded_floats() * sizeof(float));
  for (std::size_t c = 0; c < g.cin; ++c)
    for (std::size_t i = 0; i < g.h; ++i) {
      float* row = padded + c * g.plane() + (i + g.pad) * g.row_floats();
      const float* from = x + (c * g.h + i) * g.w;
      if (g.stride == 1)
        std::memcpy(row + g.pad, from, g.w * sizeof(float));
      else
        split_row_avx512(g, from, row);
    }
}

// A run of up to 16 output pixels of one row: where its input starts in the padded image, where
// its output starts in an output channel, which lanes are pixels.
struct Run {
  std::size_t in, out;
  __mmask16 lanes;
};

Run run_at(const Geometry& g, std::size_t r) {
  const std::size_t row = r / g.runs_a_row(), col = (r % g.runs_a_row()) * kLanes;
  const std::size_t count = std::min(kLanes, g.wout() - col);
  return {row * g.row_step() + col, row * g.wout() + col, static_cast<__mmask16>((1u << count) - 1)};
}

// Forward, one tile: 8 outputs (weights [taps][8], the outputs' planes `pixels` apart from y)
// over three runs.
CNN_TARGET_AVX512 void forward_tile_avx512(const float* padded, const TapOffsets& offsets, std::size_t taps,
                                           const float* weights, const std::array<Run, kTileRuns>& runs,
                                           std::size_t pixels, const float* bias, bool accumulate, bool relu,
                                           float* y) {
  __m512 acc[kTileOuts][kTileRuns];
#pragma GCC unroll 8
  for (std::size_t o = 0; o < kTileOuts; ++o)
#pragma GCC unroll 3
    for (std::size_t r = 0; r < kTileRuns; ++r) acc[o][r] = _mm512_setzero_ps();
  for (std::size_t t = 0; t < taps; ++t) {
    __m512 in[kTileRuns];
#pragma GCC unroll 3
    for (std::size_t r = 0; r < kTileRuns; ++r) in[r] = _mm512_loadu_ps(padded + runs[r].in + offsets[t]);
    const float* weight = weights + t * kTileOuts;
#pragma GCC unroll 8
    for (std::size_t o = 0; o < kTileOuts; ++o) {
      const __m512 wo = _mm512_set1_ps(weight[o]);
#pragma GCC unroll 3
      for (std::size_t r = 0; r < kTileRuns; ++r) acc[o][r] = _mm512_fmadd_ps(wo, in[r], acc[o][r]);
    }
  }
#pragma GCC unroll 8
  for (std::size_t o = 0; o < kTileOuts; ++o)
#pragma GCC unroll 3
    for (std::size_t r = 0; r < kTileRuns; ++r) {
      float* out = y + o * pixels + runs[r].out;
      __m512 value = acc[o][r];
      if (accumulate) value = _mm512_add_ps(_mm512_maskz_loadu_ps(runs[r].lanes, out), value);
      if (bias != nullptr) value = _mm512_add_ps(value, _mm512_set1_ps(bias[o]));
      if (relu) value = _mm512_max_ps(value, _mm512_setzero_ps());  // a NaN or -0 gives +0, as relu_forward
      _mm512_mask_storeu_ps(out, runs[r].lanes, value);
    }
}

// One image's outputs [cout][hout][wout] from its padded copy; the weights [cout / 8][taps][8].
void forward_image(const Geometry& g, const TapOffsets& offsets, const float* padded, const float* weights,
                   const float* bias, bool accumulate, bool relu, float* y) {
  const std::size_t runs = g.hout() * g.runs_a_row(), pixels = g.pixels(), taps = g.taps();
  for (std::size_t o0 = 0; o0 < g.cout; o0 += kTileOuts) {
    const float* block = weights + o0 * taps;
    for (std::size_t r0 = 0; r0 < runs; r0 += kTileRuns) {
      std::array<Run, kTileRuns> tile;
      for (std::size_t r = 0; r < kTileRuns; ++r)  // past the last run: the first again, stored to no lane
        tile[r] = r0 + r < runs ? run_at(g, r0 + r) : Run{tile[0].in, tile[0].out, 0};
      forward_tile_avx512(padded, offsets, taps, block, tile, pixels, bias == nullptr ? nullptr : bias + o0, accumulate,
                          relu, y + o0 * pixels);
    }
  }
}

// The dy a tile fetches into cache as it runs: outputs [first, end) of the next chunk, `rows` rows
// from `from` (output 0's; the others' `pixels` on).
struct Prefetch {
  const float* from;
  std::size_t rows, first, end;
};

// The next chunk of the image's dy after rows [row0, row1) of the outputs from o0: the next rows,
// else the next outputs' first rows; the share of its outputs the tile `group` of `groups` fetches
// (the first tile fetches none: it reads the chunk it is on).
Prefetch next_chunk(const Geometry& g, const float* dy, std::size_t o0, std::size_t row1, std::size_t step,
                    std::size_t group, std::size_t groups) {
  if (group == 0) return {nullptr, 0, 0, 0};
  const std::size_t first = (group - 1) * kFilterOuts / (groups - 1), end = group * kFilterOuts / (groups - 1);
  if (row1 < g.hout()) return {dy + o0 * g.pixels() + row1 * g.wout(), std::min(step, g.hout() - row1), first, end};
  if (o0 + kFilterOuts < g.cout) return {dy + (o0 + kFilterOuts) * g.pixels(), std::min(step, g.hout()), first, end};
  return {nullptr, 0, 0, 0};
}

// Backward-filter, one tile: Taps taps (their offsets) x 8 outputs (dy's planes `pixels` apart)
// over the output rows [row0, row1), into partial [8][taps][16] (outputs `out_step` floats apart).
template <std::size_t Taps>
CNN_TARGET_AVX512 void filter_tile_avx512(const Geometry& g, const float* padded, const std::size_t* offsets,
                                          const float* dy, std::size_t row0, std::size_t row1, float* partial,
                                          std::size_t out_step, const Prefetch& next) {
  const std::size_t pixels = g.pixels(), wout = g.wout(), row_step = g.row_step();
  __m512 acc[kFilterOuts][Taps];
#pragma GCC unroll 8
  for (std::size_t o = 0; o < kFilterOuts; ++o)
#pragma GCC unroll 3
    for (std::size_t t = 0; t < Taps; ++t) acc[o][t] = _mm512_loadu_ps(partial + o * out_step + t * kLanes);
  for (std::size_t row = row0; row < row1; ++row)
    for (std::size_t col = 0; col < wout; col += kLanes) {
      const auto lanes = static_cast<__mmask16>((1u << std::min(kLanes, wout - col)) - 1);
      const float* grad = dy + row * wout + col;
      const float* in = padded + row * row_step + col;
      for (std::size_t o = next.first; o < next.end && row - row0 < next.rows; ++o)
        _mm_prefetch(reinterpret_cast<const char*>(next.from + o * pixels + (row - row0) * wout + col), _MM_HINT_T0);
      __m512 x[Taps];
#pragma GCC unroll 3
      for (std::size_t t = 0; t < Taps; ++t) x[t] = _mm512_maskz_loadu_ps(lanes, in + offsets[t]);
#pragma GCC unroll 8
      for (std::size_t o = 0; o < kFilterOuts; ++o) {
        const __m512 d = _mm512_maskz_loadu_ps(lanes, grad + o * pixels);
#pragma GCC unroll 3
        for (std::size_t t = 0; t < Taps; ++t) acc[o][t] = _mm512_fmadd_ps(d, x[t], acc[o][t]);
      }
    }
#pragma GCC unroll 8
  for (std::size_t o = 0; o < kFilterOuts; ++o)
#pragma GCC unroll 3
    for (std::size_t t = 0; t < Taps; ++t) _mm512_storeu_ps(partial + o * out_step + t * kLanes, acc[o][t]);
}

using FilterTile = void (*)(const Geometry&, const float*, const std::size_t*, const float*, std::size_t, std::size_t,
                            float*, std::size_t, const Prefetch&);
constexpr std::array<FilterTile, kFilterTaps> kFilterTiles = {filter_tile_avx512<1>, filter_tile_avx512<2>,
                                                              filter_tile_avx512<3>};

// dbias's partial [8][16] += dy's lanes, over the output rows [row0, row1) of 8 outputs.
CNN_TARGET_AVX512 void bias_tile_avx512(const Geometry& g, const float* dy, std::size_t row0, std::size_t row1,
                                        float* partial) {
  const std::size_t pixels = g.pixels(), wout = g.wout();
  for (std::size_t o = 0; o < kFilterOuts; ++o) {
    __m512 acc = _mm512_loadu_ps(partial + o * kLanes);
    for (std::size_t row = row0; row < row1; ++row)
      for (std::size_t col = 0; col < wout; col += kLanes) {
        const auto lanes = static_cast<__mmask16>((1u << std::min(kLanes, wout - col)) - 1);
        acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(lanes, dy + o * pixels + row * wout + col));
      }
    _mm512_storeu_ps(partial + o * kLanes, acc);
  }
}

// Output rows a chunk: its dy of a tile's outputs in kChunkBytes.
std::size_t chunk_rows(const Geometry& g) {
  return std::max<std::size_t>(1, kChunkBytes / (kFilterOuts * g.wout() * sizeof(float)));
}

// A thread's partial gradient: [cout][taps][16] then the bias's [cout][16].
std::size_t filter_partial_floats(const Geometry& g) { return aligned_floats(g.cout * (g.taps() + 1) * kLanes); }

std::size_t filter_share_floats(const Geometry& g) { return filter_partial_floats(g) + g.padded_floats(); }

// The 16 lanes of a partial sum, added in lane order.
float lanes_sum(const float* lanes) {
  float sum = 0.f;
  for (std::size_t l = 0; l < kLanes; ++l) sum += lanes[l];
  return sum;
}

}  // namespace

bool pixel_conv_takes(const Conv2dDesc& d, const Shape& x) {
  if (x.rank != 4 || x[1] < 1 || x[1] > static_cast<int>(kMaxChannels) || std::max(d.groups, 1) != 1 ||
      std::max(d.dilation, 1) != 1 || (d.stride != 1 && d.stride != 2) || d.kernel_h != d.kernel_w || d.kernel_h < 1 ||
      d.kernel_h > static_cast<int>(kMaxKernel) || d.padding < 0 || d.padding >= d.kernel_h || d.out_channels <= 0 ||
      d.out_channels % static_cast<int>(kTileOuts) != 0 || x[2] < 1 || x[3] < 1)
    return false;
  return x[2] + 2 * d.padding >= d.kernel_h && x[3] + 2 * d.padding >= d.kernel_h;
}

std::size_t pixel_forward_workspace_floats(const Conv2dDesc& d, const Shape& x, int threads) {
  const Geometry g = geometry(d, x);
  const auto workers = static_cast<std::size_t>(range_threads(threads, static_cast<std::size_t>(std::max(x[0], 1))));
  return aligned_floats(g.cout * g.taps()) + workers * g.padded_floats();
}

std::size_t pixel_filter_workspace_floats(const Conv2dDesc& d, const Shape& x, int threads) {
  const auto workers = static_cast<std::size_t>(range_threads(threads, static_cast<std::size_t>(std::max(x[0], 1))));
  return workers * filter_share_floats(geometry(d, x));
}

void pixel_forward(int threads, const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y,
                   bool accumulate, Workspace ws, bool relu) {
  require_takes(d, x.shape, "conv2d_forward");
  require_workspace_floats(ws, pixel_forward_workspace_floats(d, x.shape, threads), "conv2d_forward");
  const Geometry g = geometry(d, x.shape);
  const std::size_t taps = g.taps();
  auto* weights = static_cast<float*>(ws.data);  // [cout / 8][taps][8]
  for (std::size_t o = 0; o < g.cout; ++o)
    for (std::size_t t = 0; t < taps; ++t)
      weights[((o / kTileOuts) * taps + t) * kTileOuts + o % kTileOuts] = w.data[o * taps + t];
  float* shares = weights + aligned_floats(g.cout * taps);
  const TapOffsets offsets = tap_offsets(g);
  parallel_ranges(threads, static_cast<std::size_t>(x.n()), [&](int t, std::size_t first, std::size_t end) {
    float* padded = shares + static_cast<std::size_t>(t) * g.padded_floats();
    for (std::size_t n = first; n < end; ++n) {
      pad_image(g, x.data + n * x.sample_elements(), padded);
      forward_image(g, offsets, padded, weights, bias.empty() ? nullptr : bias.data, accumulate, relu,
                    y.data + n * y.sample_elements());
    }
  });
}

void pixel_backward_filter(int threads, const Conv2dDesc& d, const Tensor& x, const Tensor& dy, Tensor dw, Tensor dbias,
                           Workspace ws) {
  require_takes(d, x.shape, "conv2d_backward_filter");
  require_workspace_floats(ws, pixel_filter_workspace_floats(d, x.shape, threads), "conv2d_backward_filter");
  const Geometry g = geometry(d, x.shape);
  const std::size_t taps = g.taps(), pixels = g.pixels(), out_step = taps * kLanes, share = filter_share_floats(g);
  const std::size_t step = chunk_rows(g), bias_at = g.cout * out_step;
  const std::size_t groups = (taps + kFilterTaps - 1) / kFilterTaps;  // of taps a tile, as even as they go
  const TapOffsets offsets = tap_offsets(g);
  auto* shares = static_cast<float*>(ws.data);
  const int used =
      parallel_ranges(threads, static_cast<std::size_t>(x.n()), [&](int t, std::size_t first, std::size_t end) {
        float* partial = shares + static_cast<std::size_t>(t) * share;
        float* padded = partial + filter_partial_floats(g);
        std::memset(partial, 0, (bias_at + g.cout * kLanes) * sizeof(float));
        for (std::size_t n = first; n < end; ++n) {
          pad_image(g, x.data + n * x.sample_elements(), padded);
          const float* grad = dy.data + n * dy.sample_elements();
          for (std::size_t o0 = 0; o0 < g.cout; o0 += kFilterOuts)
            for (std::size_t row0 = 0; row0 < g.hout(); row0 += step) {
              const std::size_t row1 = std::min(g.hout(), row0 + step);
              for (std::size_t group = 0, t0 = 0; group < groups; ++group) {
                const std::size_t count = (taps - t0) / (groups - group);
                const Prefetch next = next_chunk(g, grad, o0, row1, step, group, groups);
                kFilterTiles[count - 1](g, padded, offsets.data() + t0, grad + o0 * pixels, row0, row1,
                                        partial + o0 * out_step + t0 * kLanes, out_step, next);
                t0 += count;
              }
              if (!dbias.empty()) bias_tile_avx512(g, grad + o0 * pixels, row0, row1, partial + bias_at + o0 * kLanes);
            }
        }
      });
  // Each value's lanes in lane order, the threads' partials in thread order: dw[o][tap] += the sum.
  parallel_ranges(threads, g.cout, [&](int, std::size_t first, std::size_t end) {
    for (std::size_t o = first; o < end; ++o) {
      for (std::size_t tap = 0; tap < taps; ++tap) {
        float sum = 0.f;
        for (int t = 0; t < used; ++t)
          sum += lanes_sum(shares + static_cast<std::size_t>(t) * share + o * out_step + tap * kLanes);
        dw.data[o * taps + tap] += sum;
      }
      if (dbias.empty()) continue;
      float sum = 0.f;
      for (int t = 0; t < used; ++t)
        sum += lanes_sum(shares + static_cast<std::size_t>(t) * share + bias_at + o * kLanes);
      dbias.data[o] += sum;
    }
  });
}

}  // namespace cnn::cpu
