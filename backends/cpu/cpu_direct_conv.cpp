// The direct convolution on the CPU (backends/cpu/detail/direct_conv.hpp).
//
// Note [Direct convolution in blocks of channels]: on a 7x7 map im2col + GEMM multiplies the
// weights by a column matrix of 49 columns an image, and spends its time on the column matrix, the
// packing and tiles that fit 49 badly (76% of the host's measured peak forward, where oneDNN's
// direct kernel in its blocked layout took 0.65 of our time, conv_peak --onednn). Here each image is
// copied, once a call, into blocks of 16 channels with its padding written out, [cin/16][h + 2 pad]
// [w + 2 pad][16], and the weights into [cout/64][cin/16][k][k][16 in][64 out]. A kernel sums a
// tile of up to 7 output pixels of one row, 64 channels each, in 28 registers: for each input
// channel it loads four vectors of weights and broadcasts each pixel's input value, 28 fused
// multiply-adds for 11 loads. Narrower layers take tiles of 14 pixels x 32 channels or 28 x 16 (two
// vectors of weights or one, 14 or 28 broadcasts; the weights' blocks of outputs as wide): resnet's
// 16-channel layers on 28 x 28 maps, where im2col + GEMM ran a product 144 deep at 40% to 50% of
// the peak, run at 80% to 95%. At 16 channels the reorders weigh: the image's copy and the tiles'
// stores to NCHW turn 8 x 8 squares in registers (value by value they took 30% of the call). The
// taps that fall on the padding are skipped, as oneDNN skips them (a fifth of a 7x7 map's
// multiply-adds): the kernel's rows above or below the image, and a tap's first or last pixel
// where it reaches one column past the image's side. The weights of 64 outputs for 512 channels
// (1.2 MB) overflow a Zen 4 core's L2 cache, so the channel blocks go in passes over the map that
// keep theirs in 512 KiB, each pass adding to the sums the last one stored.
// Each output's sum is one chain of fused multiply-adds over the channel blocks, the taps and the
// 16 channels of a block, in that order, from zero, whatever the thread count (threads take
// whole images): the same bits for the same host instructions. Then the sums go to the NCHW output
// (y + sum, then the bias). AVX2 hosts run the three passes on tiles of their own over the same
// layouts and in the same chains (cpu_direct_tiles_avx2.cpp: the same bits), where direct_applies
// lets them; the kernels for a few channels (the stem's, the pixel-vector ones) are AVX-512's
// alone. A host without either takes the other paths, which sum in another order, so a network
// with such layers trains to other bits there (within rounding).
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include "backends/cpu/detail/cpu_isa.hpp"
#include "backends/cpu/detail/direct_conv.hpp"
#include "backends/cpu/detail/direct_tiles.hpp"
#include "backends/cpu/detail/gemm.hpp"
#include "backends/cpu/detail/parallel.hpp"
#include "backends/cpu/detail/pixel_conv.hpp"
#include "backends/cpu/detail/transpose_8x8.hpp"
#include "backends/cpu/detail/workspace_check.hpp"

namespace cnn::cpu {
namespace {

using direct::FilterKernel;
using direct::FilterTiles;
using direct::Geometry;
using direct::Inside;
using direct::inside;
using direct::KernelRow;
using direct::kLanes;
using direct::kWideBlock;
using direct::PhaseKernel;
using direct::PhaseTile;
using direct::TileKernel;
using direct::TileKernels;
using direct::TileOutput;

// The kernels of the host's instruction set: AVX-512's, else AVX2's.
const TileKernels& host_tiles();

constexpr std::size_t kAccumulators = 28;  // the registers a tile sums in: Vectors x 28 / Vectors pixels
constexpr std::size_t kWideVectors = kWideBlock / kLanes;

// A tile of output pixels of one row, `Vectors` vectors of output channels each: 7 pixels x 64
// channels, 14 x 32 or 28 x 16.
template <std::size_t Vectors>
constexpr std::size_t kTileWide = kAccumulators / Vectors;

// A 1x1 convolution at stride 1 treats each pixel alike: its map runs as one row of h x w pixels,
// so that the tiles cut it with no short tile at each row's end.
Geometry flattened(Geometry g) {
  if (g.k == 1 && g.stride == 1 && g.pad == 0) {
    g.w *= g.h;
    g.h = 1;
  }
  return g;
}

Geometry forward_geometry(const Conv2dDesc& d, const Shape& x) {
  return flattened({static_cast<std::size_t>(x[1]), static_cast<std::size_t>(d.out_channels),
                    static_cast<std::size_t>(x[2]), static_cast<std::size_t>(x[3]),
                    static_cast<std::size_t>(d.kernel_h), static_cast<std::size_t>(d.padding),
                    static_cast<std::size_t>(d.stride)});
}

// Backward-data's forward pass (Note [Backward-data as a convolution], cpu_conv.cpp): dy's channels
// in, dx's out, over dy's map padded by k - 1 - pad.
Geometry adjoint_geometry(const Conv2dDesc& d, const Shape& dy, const Shape& dx) {
  const auto k = static_cast<std::size_t>(d.kernel_h);
  const auto pad = k - 1 - static_cast<std::size_t>(d.padding);
  return flattened({static_cast<std::size_t>(dy[1]), static_cast<std::size_t>(dx[1]), static_cast<std::size_t>(dy[2]),
                    static_cast<std::size_t>(dy[3]), k, pad, 1});
}

std::size_t workspace_floats(const Geometry& g, std::size_t images, int threads) {
  return g.weight_floats() +
         static_cast<std::size_t>(range_threads(threads, std::max<std::size_t>(images, 1))) * g.share_floats();
}

// One image [cin][h][w] into [blocks][hp][wp][16], its border zero: 8 channels' rows turned
// into [pixel][8] by 8 x 8 squares (the row's last under masks). Only the border is zeroed first,
// not the whole copy, whose values are all written again: resnet's steps on 1x28x28 ran 1.013x
// and 1.018x faster so, resnet50's at 224 1.012x.
CNN_TARGET_AVX512 void block_image_avx512(const Geometry& g, const float* x, float* blocked) {
  const std::size_t wp = g.wp(), row = wp * kLanes, plane = g.hp() * row, hw = g.h * g.w;
  const __m512 zero = _mm512_setzero_ps();
  for (std::size_t b = 0; b < g.blocks(); ++b) {
    float* at = blocked + b * plane;
    std::memset(at, 0, g.pad * row * sizeof(float));                           // the rows above
    std::memset(at + (g.pad + g.h) * row, 0, g.pad * row * sizeof(float));  // and below
    for (std::size_t i = g.pad; i < g.pad + g.h; ++i)
      for (std::size_t q = 0; q < g.pad; ++q) {  // each row's first and last pixels
        _mm512_storeu_ps(at + i * row + q * kLanes, zero);
        _mm512_storeu_ps(at + i * row + (g.pad + g.w + q) * kLanes, zero);
      }
  }
  for (std::size_t c0 = 0; c0 < g.cin; c0 += 8)
    for (std::size_t i = 0; i < g.h; ++i) {
      float* to = blocked + (c0 / kLanes) * plane + ((i + g.pad) * wp + g.pad) * kLanes + c0 % kLanes;
      const float* from = x + c0 * hw + i * g.w;
      for (std::size_t j = 0; j < g.w; j += 8) {
        const std::size_t count = std::min<std::size_t>(8, g.w - j);
        const auto mask = static_cast<__mmask8>((1u << count) - 1);
        __m256 square[8];
        for (std::size_t c = 0; c < 8; ++c) square[c] = _mm256_maskz_loadu_ps(mask, from + c * hw + j);
        transpose_8x8_avx(square);
        for (std::size_t q = 0; q < count; ++q) _mm256_storeu_ps(to + (j + q) * kLanes, square[q]);
      }
    }
}

// The weights into [cout/out_block][blocks][k][k][16 in][out_block out]; taps(o, c) points at
// the k x k taps of output o and input c, `turned` reads them backwards (backward-data's filter
// turned half a circle).
template <class Taps>
void block_weights(int threads, const Geometry& g, Taps taps, bool turned, float* blocked) {
  const std::size_t kk = g.k * g.k, out_block = g.out_block;
  parallel_ranges(threads, g.cout / out_block, [&](int, std::size_t first, std::size_t end) {
    for (std::size_t ob = first; ob < end; ++ob)
      for (std::size_t cb = 0; cb < g.blocks(); ++cb) {
        float* to = blocked + ob * g.block_floats() + cb * kk * kLanes * out_block;
        // 16 outputs at a time: their rows of taps (16 x 16 x k x k floats) stay in L1 while each
        // line of the blocked weights is written whole.
        for (std::size_t o0 = 0; o0 < out_block; o0 += kLanes)
          for (std::size_t t = 0; t < kk; ++t)
            for (std::size_t c = 0; c < kLanes; ++c)
              for (std::size_t o = o0; o < o0 + kLanes; ++o)
                to[(t * kLanes + c) * out_block + o] =
                    taps(ob * out_block + o, cb * kLanes + c)[turned ? kk - 1 - t : t];
      }
  });
}

// A tile's Wide x Vectors accumulators from sums (the pixels `apart` floats apart), or zero; and
// back. Unrolled by pragma so that the accumulators stay in registers (Note [Accumulators in
// registers], cpu_direct_tiles_avx2.cpp: left as loops, GCC 12 keeps them in memory and stores all
// 28 after each multiply-add).
template <std::size_t Vectors, std::size_t Wide>
CNN_TARGET_AVX512 inline __attribute__((always_inline)) void load_sums_avx512(__m512 (&acc)[Wide][Vectors],
                                                                              bool zero, const float* sums,
                                                                              std::size_t apart) {
#pragma GCC unroll 28
  for (std::size_t q = 0; q < Wide; ++q)
#pragma GCC unroll 4
    for (std::size_t v = 0; v < Vectors; ++v)
      acc[q][v] = zero ? _mm512_setzero_ps() : _mm512_loadu_ps(sums + q * apart + v * kLanes);
}

template <std::size_t Vectors, std::size_t Wide>
CNN_TARGET_AVX512 inline __attribute__((always_inline)) void store_sums_avx512(__m512 (&acc)[Wide][Vectors],
                                                                               float* sums, std::size_t apart) {
#pragma GCC unroll 28
  for (std::size_t q = 0; q < Wide; ++q)
#pragma GCC unroll 4
    for (std::size_t v = 0; v < Vectors; ++v) _mm512_storeu_ps(sums + q * apart + v * kLanes, acc[q][v]);
}

// The multiply-adds of one tap over a block's 16 channels for each of the tile's pixels [Lo, Hi),
// the pixels Step floats apart.
template <std::size_t Vectors, std::size_t Wide, std::size_t Step, std::size_t Lo, std::size_t Hi>
CNN_TARGET_AVX512 inline __attribute__((always_inline)) void direct_tap_avx512(__m512 (&acc)[Wide][Vectors],
                                                                               const float* in, const float* w) {
  constexpr std::size_t kOut = Vectors * kLanes;
  for (std::size_t c = 0; c < kLanes; ++c) {
    __m512 wv[Vectors];
    for (std::size_t v = 0; v < Vectors; ++v) wv[v] = _mm512_loadu_ps(w + c * kOut + v * kLanes);
#pragma GCC unroll 28
    for (std::size_t q = Lo; q < Hi; ++q) {
      const __m512 x = _mm512_set1_ps(in[q * Step + c]);
      for (std::size_t v = 0; v < Vectors; ++v) acc[q][v] = _mm512_fmadd_ps(x, wv[v], acc[q][v]);
    }
  }
}

// Wide output pixels of row oh from ow, Vectors x 16 channels each, summed over the channel blocks
// [first, end) into sums[pixel][Vectors x 16]: from zero for the first blocks, else from what the
// blocks before left there (the same chain of fused multiply-adds). The taps on the padding are
// skipped (where a tap reaches past a side, only the first or the last pixel; other cases compute
// over the zeros of the blocked image's border).
template <std::size_t Vectors, std::size_t Wide, std::size_t Stride>
CNN_TARGET_AVX512 void direct_tile_avx512(const Geometry& g, const float* image, const float* weights, std::size_t oh,
                                          std::size_t ow, std::size_t first, std::size_t end, float* sums) {
  constexpr std::size_t kOut = Vectors * kLanes;
  __m512 acc[Wide][Vectors];
  load_sums_avx512(acc, first == 0, sums, kOut);
  const std::size_t wp = g.wp(), plane = g.hp() * wp * kLanes, kk = g.k * g.k, row = oh * Stride;
  // Kernel row i reads input row oh * stride + i - pad: inside the image for i in [top, bottom).
  const std::size_t top = row < g.pad ? g.pad - row : 0, bottom = std::min(g.k, g.h + g.pad - row);
  // Which of the tile's pixels read inside the image, for each tap column.
  std::array<Inside, 7> columns{};
  for (std::size_t j = 0; j < g.k && j < columns.size(); ++j) columns[j] = inside(ow, Wide, j, g.pad, Stride, g.w);
  for (std::size_t cb = first; cb < end; ++cb) {
    const float* block = image + cb * plane + (row * wp + ow * Stride) * kLanes;
    const float* taps = weights + cb * kk * kLanes * kOut;
    for (std::size_t i = top; i < bottom; ++i) {
      for (std::size_t j = 0; j < g.k; ++j) {
        const float* in = block + (i * wp + j) * kLanes;
        const float* w = taps + (i * g.k + j) * kLanes * kOut;
        const Inside q = columns[j];
        constexpr std::size_t kStep = Stride * kLanes;
        if (q.lo == 1 && q.hi == Wide)
          direct_tap_avx512<Vectors, Wide, kStep, 1, Wide>(acc, in, w);
        else if (q.lo == 0 && q.hi + 1 == Wide)
          direct_tap_avx512<Vectors, Wide, kStep, 0, Wide - 1>(acc, in, w);
        else
          direct_tap_avx512<Vectors, Wide, kStep, 0, Wide>(acc, in, w);
      }
    }
  }
  store_sums_avx512(acc, sums, kOut);
}

template <std::size_t Vectors, std::size_t Stride, std::size_t... Wide>
constexpr std::array<TileKernel, sizeof...(Wide)> row_kernels(std::index_sequence<Wide...>) {
  return {direct_tile_avx512<Vectors, Wide + 1, Stride>...};
}
template <std::size_t Vectors, std::size_t Stride>
constexpr auto kRowKernels = row_kernels<Vectors, Stride>(std::make_index_sequence<kTileWide<Vectors>>());

template <std::size_t Vectors>
KernelRow<TileKernel> tile_row_at(std::size_t stride) {
  const auto& kernels = stride == 1 ? kRowKernels<Vectors, 1> : kRowKernels<Vectors, 2>;
  return {kernels.data(), kTileWide<Vectors>, false};
}

// By the tile's output channels and stride (1 or 2).
KernelRow<TileKernel> tile_row_avx512(const Geometry& g) {
  if (g.out_block == kWideBlock) return tile_row_at<4>(g.stride);
  if (g.out_block == 2 * kLanes) return tile_row_at<2>(g.stride);
  return tile_row_at<1>(g.stride);
}

// Channel blocks a pass over the map takes, so that their weights (a tile's outputs' worth) stay
// in a core's L2 cache.
std::size_t blocks_in_cache(const Geometry& g) {
  constexpr std::size_t kCacheBytes = 512 * 1024;
  return std::max<std::size_t>(1, kCacheBytes / (g.k * g.k * kLanes * g.out_block * sizeof(float)));
}

// A tile's sums, [wide][out_block] from pixel p0 of the map, into the NCHW output of the block of
// outputs from o0, 8 pixels x 8 channels turned at a time.
CNN_TARGET_AVX512 void write_tile_avx512(const float* sums, std::size_t wide, std::size_t out_block,
                                         std::size_t pixels, std::size_t p0, std::size_t o0, TileOutput to, float* y) {
  for (std::size_t q0 = 0; q0 < wide; q0 += 8) {
    const std::size_t count = std::min<std::size_t>(8, wide - q0);
    const auto mask = static_cast<__mmask8>((1u << count) - 1);
    for (std::size_t c0 = 0; c0 < out_block; c0 += 8) {
      __m256 square[8];
      for (std::size_t q = 0; q < 8; ++q)
        square[q] = q < count ? _mm256_loadu_ps(sums + (q0 + q) * out_block + c0) : _mm256_setzero_ps();
      transpose_8x8_avx(square);
      for (std::size_t c = 0; c < 8; ++c) {
        float* out = y + (o0 + c0 + c) * pixels + p0 + q0;
        __m256 value = square[c];
        if (to.accumulate) value = _mm256_add_ps(_mm256_maskz_loadu_ps(mask, out), value);
        if (to.bias != nullptr) value = _mm256_add_ps(value, _mm256_set1_ps(to.bias[o0 + c0 + c]));
        if (to.relu) value = _mm256_max_ps(value, _mm256_setzero_ps());  // a NaN or -0 gives +0, as relu_forward
        _mm256_mask_storeu_ps(out, mask, value);
      }
    }
  }
}

// One image's output [cout][hout][wout], from its blocked copy. `sums` holds a block of outputs'
// sums for every pixel, [hout * wout][out_block], between the passes over the channel blocks; each
// tile goes to the output as the last pass leaves it, while its sums are in L1.
void convolve_image(const TileKernels& kernels, const Geometry& g, const float* image, const float* weights,
                    TileOutput to, float* sums, float* y) {
  const std::size_t hout = g.hout(), wout = g.wout(), pixels = hout * wout, blocks = g.blocks();
  const std::size_t out_block = g.out_block;
  const KernelRow<TileKernel> tiles = kernels.tile_row(g);
  const std::size_t step = blocks_in_cache(g);
  for (std::size_t ob = 0; ob < g.cout / out_block; ++ob)
    for (std::size_t first = 0; first < blocks; first += step) {
      const std::size_t end = std::min(blocks, first + step);
      for (std::size_t oh = 0; oh < hout; ++oh)
        for (std::size_t ow = 0, wide = 0; ow < wout; ow += wide) {
          wide = tiles.width_at(ow, wout);
          const std::size_t p0 = oh * wout + ow;
          tiles.kernels[wide - 1](g, image, weights + ob * g.block_floats(), oh, ow, first, end, sums + p0 * out_block);
          if (end == blocks) kernels.write_tile(sums + p0 * out_block, wide, out_block, pixels, p0, ob * out_block, to, y);
        }
    }
}

// Every image of x [n][cin][h][w] into y [n][cout][hout][wout], the weights already blocked at the
// workspace's start; each thread blocks its images in its own share after them.
void convolve(int threads, const Geometry& g, const Tensor& x, TileOutput to, Tensor y, float* workspace) {
  const float* weights = workspace;
  float* shares = workspace + g.weight_floats();
  const TileKernels& kernels = host_tiles();
  parallel_ranges(threads, static_cast<std::size_t>(x.n()), [&](int t, std::size_t first, std::size_t end) {
    float* image = shares + static_cast<std::size_t>(t) * g.share_floats();
    for (std::size_t i = first; i < end; ++i) {
      kernels.block_image(g, x.data + i * x.sample_elements(), image);
      convolve_image(kernels, g, image, weights, to, image + g.image_floats(), y.data + i * y.sample_elements());
    }
  });
}

// Note [Stride-2 backward-data in phases]: dx[c][ih][iw] sums dy[o][oh][ow] w[o][c][i][j] over
// the taps with 2 oh + i - pad = ih (and 2 ow + j - pad = iw): the kernel rows of one parity reach
// only the dx rows of one parity. So each of dx's four phases (ih and iw even or odd) is a stride-1
// convolution of dy with the taps of its parities, turned as backward-data turns them: for a 3x3
// kernel at padding 1, the even rows take the middle kernel row, the odd ones the first and the
// last, sub-kernels of 1x1, 1x2, 2x1 and 2x2 taps that together are the 9. On the GEMM this pass
// was a product 9 x channels deep and col2im (resnet's narrow layers at 39% to 47% of the peak).
// Each phase sums tiles as the forward pass does (direct_tap_avx512) over dy, blocked with a border
// of two pixels (as far as a sub-kernel reaches past dy's side; the rows past it are skipped), and
// stores them to every other pixel of a row of dx's sums (two rows kept, the whole map where dy's
// channels take several passes); each dx row goes to dx as the forward pass writes its tiles.
// A dx row no tap reaches (the last of an even map at padding 0) gets no term: zero. Each value's
// sum is one chain over dy's channel blocks, the phase's taps and a block's 16 channels, in that
// order: the same bits on any thread count.
constexpr std::size_t kPhaseBorder = 2;

// The kernel rows (or columns) that reach dx rows of one parity: `count` of them, sub-row t being
// kernel row first - 2t, read at dy row r + offset + t for dx row 2r + parity.
struct PhaseTaps {
  std::size_t count = 0, first = 0;
  std::ptrdiff_t offset = 0;
};

PhaseTaps phase_taps(std::size_t k, std::size_t pad, std::size_t parity) {
  const bool last_reaches = (k - 1 + parity + pad) % 2 == 0;  // kernel row k - 1 has the parity's
  if (!last_reaches && k < 2) return {};
  const std::size_t first = last_reaches ? k - 1 : k - 2;
  return {first / 2 + 1, first, (static_cast<std::ptrdiff_t>(parity + pad) - static_cast<std::ptrdiff_t>(first)) / 2};
}

// dy blocked with its border (dy's channels in, dx's out, `out_block` of them a tile); dx's map;
// the taps of each parity of rows and columns. Phase p = 2 x row parity + column parity.
struct Phases {
  Geometry dy;
  std::size_t h, w;
  PhaseTaps rows[2], columns[2];
  std::size_t taps(std::size_t p) const { return rows[p / 2].count * columns[p % 2].count; }
  // Floats of a block of outputs' weights before phase p's: [phase][cin/16][taps][16 in][out_block out].
  std::size_t weights_before(std::size_t p) const {
    std::size_t taps_before = 0;
    for (std::size_t q = 0; q < p; ++q) taps_before += taps(q);
    return taps_before * dy.cin * dy.out_block;
  }
  // dx rows whose sums are kept: two where one pass over dy's channel blocks sums them, else all.
  std::size_t sums_rows() const { return blocks_in_cache(dy) >= dy.blocks() ? std::min<std::size_t>(2, h) : h; }
  std::size_t sums_floats() const { return aligned_floats(sums_rows() * w * dy.out_block); }
  std::size_t share_floats() const { return dy.image_floats() + sums_floats(); }
};

Phases phases_of(const Conv2dDesc& d, const Shape& dy, const Shape& dx) {
  const auto k = static_cast<std::size_t>(d.kernel_h), pad = static_cast<std::size_t>(d.padding);
  Phases ph{Geometry{static_cast<std::size_t>(dy[1]), static_cast<std::size_t>(dx[1]), static_cast<std::size_t>(dy[2]),
                     static_cast<std::size_t>(dy[3]), k, kPhaseBorder, 1},
            static_cast<std::size_t>(dx[2]),
            static_cast<std::size_t>(dx[3]),
            {},
            {}};
  for (std::size_t parity = 0; parity < 2; ++parity) ph.rows[parity] = ph.columns[parity] = phase_taps(k, pad, parity);
  return ph;
}

std::size_t phases_workspace_floats(const Phases& ph, std::size_t images, int threads) {
  return ph.dy.weight_floats() +
         static_cast<std::size_t>(range_threads(threads, std::max<std::size_t>(images, 1))) * ph.share_floats();
}

// The forward weights w [dy channels][dx channels][k][k] into each block of outputs' phases.
void block_phase_weights(int threads, const Phases& ph, const float* w, float* blocked) {
  const Geometry& g = ph.dy;
  const std::size_t kk = g.k * g.k, out_block = g.out_block;
  parallel_ranges(threads, g.cout / out_block, [&](int, std::size_t first, std::size_t end) {
    for (std::size_t ob = first; ob < end; ++ob)
      for (std::size_t p = 0; p < 4; ++p) {
        const PhaseTaps &rows = ph.rows[p / 2], &columns = ph.columns[p % 2];
        float* to = blocked + ob * g.block_floats() + ph.weights_before(p);
        for (std::size_t cb = 0; cb < g.blocks(); ++cb)
          for (std::size_t t = 0; t < rows.count; ++t)
            for (std::size_t u = 0; u < columns.count; ++u) {
              const std::size_t tap = (rows.first - 2 * t) * g.k + columns.first - 2 * u;
              for (std::size_t c = 0; c < kLanes; ++c)
                for (std::size_t o = 0; o < out_block; ++o)
                  *to++ = w[((cb * kLanes + c) * g.cout + ob * out_block + o) * kk + tap];
            }
      }
  });
}

// Wide pixels of one phase's row, Vectors x 16 dx channels each, summed over dy's channel blocks
// [first, end) into sums (the pixels 2 x Vectors x 16 floats apart), from zero for the first
// blocks, else from what the blocks before left there.
template <std::size_t Vectors, std::size_t Wide>
CNN_TARGET_AVX512 void phase_tile_avx512(const Geometry& g, const PhaseTile& tile, std::size_t first, std::size_t end,
                                         float* sums) {
  constexpr std::size_t kOut = Vectors * kLanes, kApart = 2 * kOut;
  __m512 acc[Wide][Vectors];
  load_sums_avx512(acc, first == 0, sums, kApart);
  const std::size_t wp = g.wp(), plane = g.hp() * wp * kLanes;
  for (std::size_t cb = first; cb < end; ++cb) {
    const float* block = tile.image + cb * plane;
    const float* taps = tile.weights + cb * tile.taps * kLanes * kOut;
    for (std::size_t t = tile.top; t < tile.bottom; ++t)
      for (std::size_t u = 0; u < tile.columns; ++u)
        direct_tap_avx512<Vectors, Wide, kLanes, 0, Wide>(acc, block + (t * wp + u) * kLanes,
                                                          taps + (t * tile.columns + u) * kLanes * kOut);
  }
  store_sums_avx512(acc, sums, kApart);
}

template <std::size_t Vectors, std::size_t... Wide>
constexpr std::array<PhaseKernel, sizeof...(Wide)> phase_kernels(std::index_sequence<Wide...>) {
  return {phase_tile_avx512<Vectors, Wide + 1>...};
}
template <std::size_t Vectors>
constexpr auto kPhaseKernels = phase_kernels<Vectors>(std::make_index_sequence<kTileWide<Vectors>>());

KernelRow<PhaseKernel> phase_row_avx512(const Geometry& g) {
  if (g.out_block == kWideBlock) return {kPhaseKernels<4>.data(), kTileWide<4>, false};
  if (g.out_block == 2 * kLanes) return {kPhaseKernels<2>.data(), kTileWide<2>, false};
  return {kPhaseKernels<1>.data(), kTileWide<1>, false};
}

// One image's dx [cin][h][w] from its blocked dy: for each block of dx channels and pass over dy's
// channel blocks, each dx row's two phases (its even and odd pixels), then the row to dx.
void phases_image(const TileKernels& kernels, const Phases& ph, const float* image, const float* weights,
                  bool accumulate, float* sums, float* dx) {
  const Geometry& g = ph.dy;
  const std::size_t out_block = g.out_block, blocks = g.blocks(), step = blocks_in_cache(g), wp = g.wp();
  const KernelRow<PhaseKernel> row_kernels = kernels.phase_row(g);
  const auto hout = static_cast<std::ptrdiff_t>(g.h);
  const std::size_t kept = ph.sums_rows();
  for (std::size_t ob = 0; ob < g.cout / out_block; ++ob)
    for (std::size_t first = 0; first < blocks; first += step) {
      const std::size_t end = std::min(blocks, first + step);
      for (std::size_t ih = 0; ih < ph.h; ++ih) {
        const PhaseTaps& rows = ph.rows[ih % 2];
        // Sub-row t reads dy row `row` + t: inside dy for t in [top, bottom).
        const std::ptrdiff_t row = static_cast<std::ptrdiff_t>(ih / 2) + rows.offset;
        const auto count = static_cast<std::ptrdiff_t>(rows.count);
        const auto top = static_cast<std::size_t>(std::clamp<std::ptrdiff_t>(-row, 0, count));
        const auto bottom = static_cast<std::size_t>(std::clamp<std::ptrdiff_t>(hout - row, 0, count));
        for (std::size_t parity = 0; parity < 2; ++parity) {
          const std::size_t p = 2 * (ih % 2) + parity, wide = (ph.w - parity + 1) / 2;
          const PhaseTaps& columns = ph.columns[parity];
          float* at = sums + ((ih % kept) * ph.w + parity) * out_block;
          if (columns.count == 0 || top >= bottom) {  // no tap reaches these pixels
            for (std::size_t q = 0; q < wide && first == 0; ++q) std::fill_n(at + 2 * q * out_block, out_block, 0.f);
            continue;
          }
          const auto border = static_cast<std::ptrdiff_t>(kPhaseBorder);
          for (std::size_t s0 = 0, n = 0; s0 < wide; s0 += n) {
            n = row_kernels.width_at(s0, wide);
            const std::ptrdiff_t column = static_cast<std::ptrdiff_t>(s0) + columns.offset + border;
            const auto pixel = static_cast<std::size_t>((row + border) * static_cast<std::ptrdiff_t>(wp) + column);
            const PhaseTile tile{image + pixel * kLanes, weights + ob * g.block_floats() + ph.weights_before(p),
                                 columns.count, ph.taps(p), top, bottom};
            row_kernels.kernels[n - 1](g, tile, first, end, at + 2 * s0 * out_block);
          }
        }
        if (end == blocks)
          kernels.write_tile(sums + (ih % kept) * ph.w * out_block, ph.w, out_block, ph.h * ph.w, ih * ph.w,
                             ob * out_block, TileOutput{nullptr, accumulate}, dx);
      }
    }
}

// dx of every image from dy, the phases' weights already blocked at the workspace's start.
void phases_backward_data(int threads, const Phases& ph, const Tensor& dy, bool accumulate, Tensor dx,
                          float* workspace) {
  const float* weights = workspace;
  float* shares = workspace + ph.dy.weight_floats();
  const TileKernels& kernels = host_tiles();
  parallel_ranges(threads, static_cast<std::size_t>(dy.n()), [&](int t, std::size_t first, std::size_t end) {
    float* image = shares + static_cast<std::size_t>(t) * ph.share_floats();
    for (std::size_t i = first; i < end; ++i) {
      kernels.block_image(ph.dy, dy.data + i * dy.sample_elements(), image);
      phases_image(kernels, ph, image, weights, accumulate, image + ph.dy.image_floats(),
                   dx.data + i * dx.sample_elements());
    }
  });
}

// Note [Direct backward-filter]: dw[o][c][i][j] is the sum over images and output pixels of
// dy[o][pixel] times the input at the pixel moved by the tap (i, j). A kernel holds a tile of
// outputs x vectors of input channels of one tap in up to 28 registers (7 x 64 channels, 14 x 32
// or 28 x 16) and runs over the pixels whose input lies inside the image (the padding skipped
// exactly: a rectangle a tap), for each of a group of images: per pixel a vector of the blocked
// image for each block of 16 channels and a broadcast of dy's NCHW value for each output, a fused
// multiply-add for each pair. The group's images (up to 8) are blocked side by side first, so that
// each thread's partial gradient, [tap][cout][cin], is stored once a group, not once an image (9 MB
// for 512 channels); a narrow layer's partial is small beside its image, and its groups are one
// image. Each value's sum runs over the images and pixels in order, however the groups and the
// tiles cut them: the same bits. The partials are added in thread order into dw, as the other
// paths add theirs.
constexpr std::size_t kFilterGroup = 8;

// Outs outputs from o0 x Vectors x 16 input channels from block cb0, tap (i, j), over `count`
// images blocked side by side (image_floats() apart) and their dy (`dy_stride` apart): added to
// partial[o][c] (rows cin apart).
template <std::size_t Vectors, std::size_t Outs>
CNN_TARGET_AVX512 void direct_filter_avx512(const Geometry& g, const float* images, const float* dy,
                                            std::size_t dy_stride, std::size_t count, std::size_t i, std::size_t j,
                                            std::size_t o0, std::size_t cb0, float* partial) {
  __m512 acc[Outs][Vectors];
  load_sums_avx512(acc, false, partial, g.cin);
  const std::size_t wp = g.wp(), plane = g.hp() * wp * kLanes, hout = g.hout(), wout = g.wout(), pixels = hout * wout;
  // Output pixel (oh, ow) reads input (oh * stride + i - pad, ow * stride + j - pad): inside the
  // image for oh in [rows.lo, rows.hi) and ow in [columns.lo, columns.hi).
  const Inside rows = inside(0, hout, i, g.pad, g.stride, g.h), columns = inside(0, wout, j, g.pad, g.stride, g.w);
  for (std::size_t n = 0; n < count; ++n) {
    const float* image = images + n * g.image_floats() + cb0 * plane;
    const float* grad = dy + n * dy_stride + o0 * pixels;
    for (std::size_t oh = rows.lo; oh < rows.hi; ++oh)
      for (std::size_t ow = columns.lo; ow < columns.hi; ++ow) {
        const float* in = image + ((oh * g.stride + i) * wp + ow * g.stride + j) * kLanes;
        __m512 xv[Vectors];
        for (std::size_t v = 0; v < Vectors; ++v) xv[v] = _mm512_loadu_ps(in + v * plane);
        const std::size_t p = oh * wout + ow;
#pragma GCC unroll 28
        for (std::size_t r = 0; r < Outs; ++r) {
          const __m512 d = _mm512_set1_ps(grad[r * pixels + p]);
          for (std::size_t v = 0; v < Vectors; ++v) acc[r][v] = _mm512_fmadd_ps(d, xv[v], acc[r][v]);
        }
      }
  }
  store_sums_avx512(acc, partial, g.cin);
}

template <std::size_t Vectors, std::size_t... Outs>
constexpr std::array<FilterKernel, sizeof...(Outs)> filter_kernels(std::index_sequence<Outs...>) {
  return {direct_filter_avx512<Vectors, Outs + 1>...};
}
template <std::size_t Vectors>
constexpr auto kFilterKernels = filter_kernels<Vectors>(std::make_index_sequence<kAccumulators / Vectors>());

FilterTiles filter_tiles_avx512(const Geometry& g) {
  const std::size_t blocks = g.cin / kLanes;
  const std::size_t vectors = blocks % 4 == 0 ? 4 : blocks % 2 == 0 ? 2 : 1;
  const std::size_t most = kAccumulators / vectors, tiles = (g.cout + most - 1) / most;
  const std::size_t outs = (g.cout + tiles - 1) / tiles;
  const FilterKernel* kernels = vectors == 4   ? kFilterKernels<4>.data()
                                : vectors == 2 ? kFilterKernels<2>.data()
                                               : kFilterKernels<1>.data();
  return {kernels, vectors, outs};
}

const TileKernels& host_tiles() {
  static constexpr TileKernels avx512{block_image_avx512, write_tile_avx512, tile_row_avx512, phase_row_avx512,
                                      filter_tiles_avx512};
  return isa() >= CpuIsa::avx512 ? avx512 : direct::avx2_tiles();
}

std::size_t filter_partial_floats(const Geometry& g) { return aligned_floats(g.cout * g.cin * g.k * g.k + g.cout); }

// Images a group takes: enough that their blocked copies outweigh the partial gradient stored
// and loaded once a group (up to 8), and no more (one, where an image outweighs it: a narrow
// layer's large map).
std::size_t filter_group(const Geometry& g) {
  return std::clamp<std::size_t>(filter_partial_floats(g) / g.image_floats() + 1, 1, kFilterGroup);
}

// A thread's share: its partial gradient (dw's, then the bias's), then a group's blocked images.
std::size_t filter_share_floats(const Geometry& g, std::size_t images) {
  return filter_partial_floats(g) + std::min(images, filter_group(g)) * g.image_floats();
}

// Note [Backward-filter split by outputs]: split over the images, each thread sums its own partial
// gradient, which is zeroed first and added into dw after: for resnet50's 512 -> 512 layers on 7 x 7
// maps, 9 MB a thread, written, read and reduced once a call whatever the batch, 16% of the pass
// at batch 16 (perf). Where the partial outweighs an image and there are tiles of outputs enough
// to share, the threads split the outputs instead: a group's images are blocked once, by all
// threads, into memory all of them read; each thread sums its outputs' tiles over every image into
// one partial, which is added into dw once. Each value's sum then runs over all the images in
// order, however many threads share the outputs.
bool filter_splits_outputs(const Geometry& g, const FilterTiles& tiles, int threads) {
  const std::size_t out_tiles = (g.cout + tiles.outs - 1) / tiles.outs;
  return filter_partial_floats(g) >= g.image_floats() && out_tiles >= 4 * static_cast<std::size_t>(threads);
}

std::size_t filter_workspace_floats(const Geometry& g, std::size_t images, int threads) {
  images = std::max<std::size_t>(images, 1);
  if (filter_splits_outputs(g, host_tiles().filter_tiles(g), threads)) return filter_share_floats(g, images);
  return static_cast<std::size_t>(range_threads(threads, images)) * filter_share_floats(g, images);
}

// A group of `count` blocked images and their dy (from `grad`) added into the partial gradient
// [tap][cout][cin] for outputs [o_first, o_end), and into the bias's [cout] after it when `bias`.
void add_group(const Geometry& g, const FilterTiles& tiles, const float* blocked, const float* grad,
               std::size_t dy_stride, std::size_t count, std::size_t o_first, std::size_t o_end, bool bias,
               float* partial) {
  const std::size_t kk = g.k * g.k, pixels = g.hout() * g.wout(), weights = g.cout * g.cin * kk;
  for (std::size_t tap = 0; tap < kk; ++tap)
    for (std::size_t o0 = o_first; o0 < o_end; o0 += tiles.outs)
      for (std::size_t cb0 = 0; cb0 < g.cin / kLanes; cb0 += tiles.vectors)
        tiles.kernels[std::min(tiles.outs, o_end - o0) - 1](g, blocked, grad, dy_stride, count, tap / g.k, tap % g.k,
                                                            o0, cb0,
                                                            partial + (tap * g.cout + o0) * g.cin + cb0 * kLanes);
  for (std::size_t n = 0; n < count && bias; ++n)
    for (std::size_t o = o_first; o < o_end; ++o) {
      const float* row = grad + n * dy_stride + o * pixels;
      float sum = partial[weights + o];
      for (std::size_t p = 0; p < pixels; ++p) sum += row[p];
      partial[weights + o] = sum;
    }
}

// Backward-filter split by outputs (Note [Backward-filter split by outputs]): one partial
// [tap][cout][cin], then [cout], before a group's blocked images.
void filter_by_outputs(int threads, const Geometry& g, const TileKernels& kernels, const FilterTiles& tiles,
                       const Tensor& x, const Tensor& dy, Tensor dw, Tensor dbias, float* partial) {
  const auto images = static_cast<std::size_t>(x.n());
  if (images == 0) return;  // dw and dbias gain nothing; the partial is never zeroed
  const std::size_t kk = g.k * g.k, weights = g.cout * g.cin * kk;
  const std::size_t group = filter_group(g), out_tiles = (g.cout + tiles.outs - 1) / tiles.outs;
  float* blocked = partial + filter_partial_floats(g);
  for (std::size_t b = 0; b < images; b += group) {
    const std::size_t count = std::min(group, images - b);
    parallel_ranges(threads, count, [&](int, std::size_t first, std::size_t end) {
      for (std::size_t n = first; n < end; ++n)
        kernels.block_image(g, x.data + (b + n) * x.sample_elements(), blocked + n * g.image_floats());
    });
    const float* grad = dy.data + b * dy.sample_elements();
    parallel_ranges(threads, out_tiles, [&](int, std::size_t first, std::size_t end) {
      const std::size_t o_first = first * tiles.outs, o_end = std::min(g.cout, end * tiles.outs);
      if (b == 0) {
        for (std::size_t tap = 0; tap < kk; ++tap)
          std::memset(partial + (tap * g.cout + o_first) * g.cin, 0, (o_end - o_first) * g.cin * sizeof(float));
        std::fill(partial + weights + o_first, partial + weights + o_end, 0.f);
      }
      add_group(g, tiles, blocked, grad, dy.sample_elements(), count, o_first, o_end, !dbias.empty(), partial);
    });
  }
  // dw[o][c][tap] += partial[tap][o][c]: dw written along, the partial's kk rows read along.
  parallel_ranges(threads, g.cout, [&](int, std::size_t first, std::size_t end) {
    for (std::size_t o = first; o < end; ++o) {
      float* row = dw.data + o * g.cin * kk;
      for (std::size_t c = 0; c < g.cin; ++c)
        for (std::size_t tap = 0; tap < kk; ++tap) row[c * kk + tap] += partial[(tap * g.cout + o) * g.cin + c];
      if (!dbias.empty()) dbias.data[o] += partial[weights + o];
    }
  });
}

// Note [The stem's backward-filter]: the kernel above runs its vectors along 64 input channels,
// and the ImageNet stem has 3; on the GEMM its pass packed the transposed column matrix a gathered
// float at a time and ran at 54% of the peak. Here the vectors run along 64 outputs. For each
// output row, a block of 64 outputs of dy is turned to [pixel][64] (8 x 8 squares at a time), and
// a kernel holds the 7 taps of one kernel row (one input channel, one i) x 64 outputs in 28
// registers and runs along the row's pixels: per pixel four vectors of the turned dy and 7
// broadcasts of the input row (the image copied with its padding written out), 28 fused
// multiply-adds. Kernel rows on the padding are skipped; taps on the padding's columns multiply
// its zeros. Each thread takes whole images into its partial gradient, [cin][k][k][cout]; the
// partials are added in thread order into dw. The stem's forward pass, and both passes of a 3x3
// convolution of a few channels, run with their vectors along the pixels instead (Note [Vectors
// along the pixels], cpu_pixel_conv.cpp: on the stem's 147 taps this kernel's backward-filter is
// 1.15x that one's, its forward 0.8x).

// dy's outputs [o0, o0 + out) of output row oh, [wout][out] into `turned`.
CNN_TARGET_AVX512 void turn_dy_row_avx512(const float* dy, std::size_t pixels, std::size_t wout, std::size_t out,
                                          float* turned) {
  std::size_t ow0 = 0;
  for (; ow0 + 8 <= wout; ow0 += 8)
    for (std::size_t o0 = 0; o0 < out; o0 += 8) {
      __m256 square[8];
      for (std::size_t o = 0; o < 8; ++o) square[o] = _mm256_loadu_ps(dy + (o0 + o) * pixels + ow0);
      transpose_8x8_avx(square);
      for (std::size_t q = 0; q < 8; ++q) _mm256_storeu_ps(turned + (ow0 + q) * out + o0, square[q]);
    }
  for (; ow0 < wout; ++ow0)
    for (std::size_t o = 0; o < out; ++o) turned[ow0 * out + o] = dy[o * pixels + ow0];
}

// One kernel row of one input channel, its 7 taps x 64 outputs, over one output row: `row` the
// padded input row it reads (pixel ow reads row[ow * stride + j]), `turned` dy's row [wout][64];
// added to partial[j][o] (taps cout apart).
CNN_TARGET_AVX512 void stem_filter_row_avx512(const float* row, std::size_t stride, const float* turned,
                                              std::size_t wout, std::size_t cout, float* partial) {
  constexpr std::size_t kTaps = 7;
  __m512 acc[kTaps][kWideVectors];
  for (std::size_t j = 0; j < kTaps; ++j)
    for (std::size_t v = 0; v < kWideVectors; ++v) acc[j][v] = _mm512_loadu_ps(partial + j * cout + v * kLanes);
  for (std::size_t ow = 0; ow < wout; ++ow) {
    __m512 d[kWideVectors];
    for (std::size_t v = 0; v < kWideVectors; ++v) d[v] = _mm512_loadu_ps(turned + ow * kWideBlock + v * kLanes);
    const float* in = row + ow * stride;
#pragma GCC unroll 7
    for (std::size_t j = 0; j < kTaps; ++j) {
      const __m512 x = _mm512_set1_ps(in[j]);
      for (std::size_t v = 0; v < kWideVectors; ++v) acc[j][v] = _mm512_fmadd_ps(x, d[v], acc[j][v]);
    }
  }
  for (std::size_t j = 0; j < kTaps; ++j)
    for (std::size_t v = 0; v < kWideVectors; ++v) _mm512_storeu_ps(partial + j * cout + v * kLanes, acc[j][v]);
}

// One image [cin][h][w] into [cin][hp][wp], its border zero.
void pad_image(const Geometry& g, const float* x, float* padded) {
  const std::size_t wp = g.wp();
  std::memset(padded, 0, g.cin * g.hp() * wp * sizeof(float));
  for (std::size_t c = 0; c < g.cin; ++c)
    for (std::size_t i = 0; i < g.h; ++i)
      std::memcpy(padded + (c * g.hp() + i + g.pad) * wp + g.pad, x + (c * g.h + i) * g.w, g.w * sizeof(float));
}

// A thread's share: its partial gradient (dw's, then the bias's), the padded image, dy's turned row.
std::size_t image_filter_share_floats(const Geometry& g) {
  return filter_partial_floats(g) + aligned_floats(g.cin * g.hp() * g.wp()) + aligned_floats(g.wout() * g.out_block);
}

std::size_t image_filter_workspace_floats(const Geometry& g, std::size_t images, int threads) {
  return static_cast<std::size_t>(range_threads(threads, std::max<std::size_t>(images, 1))) *
         image_filter_share_floats(g);
}

void image_backward_filter(int threads, const Geometry& g, const Tensor& x, const Tensor& dy, Tensor dw, Tensor dbias,
                           float* shares) {
  const std::size_t kk = g.k * g.k, hout = g.hout(), wout = g.wout(), pixels = hout * wout, out = g.out_block;
  const std::size_t weights = g.cout * g.cin * kk, share = image_filter_share_floats(g);
  const auto images = static_cast<std::size_t>(x.n());
  const int used = parallel_ranges(threads, images, [&](int t, std::size_t first, std::size_t end) {
    float* partial = shares + static_cast<std::size_t>(t) * share;  // [cin][k][k][cout], then [cout]
    float* padded = partial + filter_partial_floats(g);
    float* turned = padded + aligned_floats(g.cin * g.hp() * g.wp());
    std::memset(partial, 0, (weights + g.cout) * sizeof(float));
    for (std::size_t n = first; n < end; ++n) {
      pad_image(g, x.data + n * x.sample_elements(), padded);
      const float* grad = dy.data + n * dy.sample_elements();
      for (std::size_t oh = 0; oh < hout; ++oh)
        for (std::size_t o0 = 0; o0 < g.cout; o0 += out) {
          const float* block = grad + o0 * pixels + oh * wout;
          turn_dy_row_avx512(block, pixels, wout, out, turned);
          for (std::size_t c = 0; c < g.cin; ++c)
            for (std::size_t i = 0; i < g.k; ++i) {
              const std::size_t row = oh * g.stride + i;  // in the padded image
              if (row < g.pad || row >= g.pad + g.h) continue;
              stem_filter_row_avx512(padded + (c * g.hp() + row) * g.wp(), g.stride, turned, wout, g.cout,
                                     partial + (c * g.k + i) * g.k * g.cout + o0);
            }
          for (std::size_t o = 0; o < out && !dbias.empty(); ++o) {
            float sum = partial[weights + o0 + o];
            for (std::size_t ow = 0; ow < wout; ++ow) sum += block[o * pixels + ow];
            partial[weights + o0 + o] = sum;
          }
        }
    }
  });
  // The threads' partials added in thread order: dw[o][c][tap] += the sum of partial[c][tap][o].
  parallel_ranges(threads, g.cout, [&](int, std::size_t first, std::size_t end) {
    for (std::size_t o = first; o < end; ++o) {
      for (std::size_t ct = 0; ct < g.cin * kk; ++ct) {
        float sum = 0.f;
        for (int t = 0; t < used; ++t) sum += shares[static_cast<std::size_t>(t) * share + ct * g.cout + o];
        dw.data[o * g.cin * kk + ct] += sum;
      }
      if (dbias.empty()) continue;
      float sum = 0.f;
      for (int t = 0; t < used; ++t) sum += shares[static_cast<std::size_t>(t) * share + weights + o];
      dbias.data[o] += sum;
    }
  });
}

std::atomic<int> direct_off{0};

// A convolution of a few channels (an image's: RGB, grey), forward and backward-filter (its
// backward-data is not needed: the input is the image). The ImageNet stem: 7x7 at stride 2,
// padding at most 3, into a multiple of 64; a 3x3 at stride 1 or 2, padding at most 2, into a
// multiple of 16.
enum class FewChannels { no, stem, three_by_three };

FewChannels few_channels(const Conv2dDesc& d, const Shape& x) {
  if (x.rank != 4 || x[1] < 1 || x[1] >= static_cast<int>(kLanes) || std::max(d.groups, 1) != 1 ||
      std::max(d.dilation, 1) != 1 || d.kernel_h != d.kernel_w || d.padding < 0 || d.out_channels <= 0 ||
      x[2] + 2 * d.padding < d.kernel_h || x[3] + 2 * d.padding < d.kernel_h)
    return FewChannels::no;
  if (d.kernel_h == 7 && d.stride == 2 && d.padding <= 3 && d.out_channels % static_cast<int>(kWideBlock) == 0)
    return FewChannels::stem;
  if (d.kernel_h == 3 && (d.stride == 1 || d.stride == 2) && d.padding <= 2 &&
      d.out_channels % static_cast<int>(kLanes) == 0)
    return FewChannels::three_by_three;
  return FewChannels::no;
}

// The few-channel passes that run with their vectors along the pixels (pixel_conv.hpp): each but
// the stem's backward-filter, which runs along the outputs (Note [The stem's backward-filter]).
bool along_pixels(const Conv2dDesc& d, const Shape& x, DirectPass pass) {
  const FewChannels few = few_channels(d, x);
  if (few == FewChannels::no || !pixel_conv_takes(d, x)) return false;
  return pass == DirectPass::forward || (pass == DirectPass::backward_filter && few == FewChannels::three_by_three);
}

void require_applies(const Conv2dDesc& d, const Shape& x, DirectPass pass, const char* what) {
  if (!direct_applies(d, x, false, pass))
    throw std::logic_error(std::string(what) + ": the direct passes take no such convolution of " + x.str());
}

}  // namespace

DirectOff::DirectOff() { ++direct_off; }
DirectOff::~DirectOff() { --direct_off; }

bool direct_applies(const Conv2dDesc& d, const Shape& x, bool products16, DirectPass pass) {
  if (direct_off.load() != 0 || products16 || isa() < CpuIsa::avx2) return false;
  // AVX2 has the blocked tiles (cpu_direct_tiles_avx2.cpp), not the kernels for a few channels.
  const bool avx512 = isa() >= CpuIsa::avx512;
  switch (few_channels(d, x)) {
    case FewChannels::stem:
    case FewChannels::three_by_three:
      return avx512 && pass != DirectPass::backward_data;
    case FewChannels::no:
      break;
  }
  if (x.rank != 4 || std::max(d.groups, 1) != 1 || (d.stride != 1 && d.stride != 2) || std::max(d.dilation, 1) != 1 ||
      d.kernel_h != d.kernel_w)
    return false;
  const int k = d.kernel_h;
  const bool pointwise = k == 1 && d.padding == 0;
  if (!pointwise && (k != 3 || d.padding < 0 || d.padding > 2)) return false;
  const int cin = x[1], cout = d.out_channels, lanes = static_cast<int>(kLanes), wide = static_cast<int>(kWideBlock);
  if (cin <= 0 || cout <= 0 || cin % lanes != 0 || cout % lanes != 0) return false;
  if (x[2] + 2 * d.padding < k || x[3] + 2 * d.padding < k) return false;
  const int hout = (x[2] + 2 * d.padding - k) / d.stride + 1, wout = (x[3] + 2 * d.padding - k) / d.stride + 1;
  const bool small_map = std::min(hout, wout) < 8;
  // Narrow: a tile of fewer than 64 outputs (the forward pass's, or backward-data's adjoint's: dx's
  // channels), or backward-filter's of fewer than 64 input channels.
  const int tile_outputs = pass == DirectPass::backward_data ? cin : cout;
  const bool narrow = tile_outputs % wide != 0 || (pass == DirectPass::backward_filter && cin % wide != 0);
  // AVX2's tiles beat the matrix products where those are weakest, over at most 64 channels in
  // (x's, or dy's for backward-data): narrow layers, small maps, stride 2 (conv_peak, Zen 3: 1.1x
  // to 3x); over more, 0.55x to 1.47x from run to run. Not forward or backward-data of 1x1 layers
  // (0.6x), nor stride-2 backward-data into 64 channels or more (0.8x to 1.0x).
  const int tile_inputs = pass == DirectPass::backward_data ? cout : cin;
  if (!avx512 && (tile_inputs > wide || (pointwise && pass != DirectPass::backward_filter) ||
                  (pass == DirectPass::backward_data && d.stride == 2 && !narrow)))
    return false;
  // Backward-data at stride 2 runs in phases (Note [Stride-2 backward-data in phases]), 3x3 alone
  // (a 1x1's one phase was 0.85x to 1.0x the GEMM's), and not where narrow tiles of dx meet dy rows
  // under 8 (a phase's row fills half a tile: 0.85x).
  if (pass == DirectPass::backward_data && d.stride == 2) return !pointwise && !(narrow && small_map);
  if (pointwise) return pass == DirectPass::backward_filter ? cin % (2 * lanes) == 0 : small_map;
  if (d.stride == 2 || small_map) return true;
  if (narrow) return std::min(cin, cout) < 32 || std::max(hout, wout) <= (pass == DirectPass::forward ? 14 : 28);
  return pass == DirectPass::forward && std::max(hout, wout) <= 14;
}

std::size_t direct_workspace_floats(const Conv2dDesc& d, const Shape& x, const Shape& y, DirectPass pass, int threads) {
  const auto images = static_cast<std::size_t>(std::max(x[0], 0));
  switch (pass) {
    case DirectPass::forward:
      if (along_pixels(d, x, pass)) return pixel_forward_workspace_floats(d, x, threads);
      return workspace_floats(forward_geometry(d, x), images, threads);
    case DirectPass::backward_data:
      if (d.stride == 2) return phases_workspace_floats(phases_of(d, y, x), images, threads);
      return workspace_floats(adjoint_geometry(d, y, x), images, threads);
    case DirectPass::backward_filter:
      break;
  }
  if (along_pixels(d, x, pass)) return pixel_filter_workspace_floats(d, x, threads);
  if (few_channels(d, x) != FewChannels::no)
    return image_filter_workspace_floats(forward_geometry(d, x), images, threads);
  return filter_workspace_floats(forward_geometry(d, x), images, threads);
}

void direct_forward(int threads, const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y,
                    bool accumulate, Workspace ws, bool relu) {
  require_applies(d, x.shape, DirectPass::forward, "conv2d_forward");
  if (along_pixels(d, x.shape, DirectPass::forward))
    return pixel_forward(threads, d, x, w, bias, y, accumulate, ws, relu);
  const Geometry g = forward_geometry(d, x.shape);
  require_workspace_floats(ws, workspace_floats(g, static_cast<std::size_t>(x.n()), threads), "conv2d_forward");
  auto* blocked = static_cast<float*>(ws.data);
  const std::size_t kk = g.k * g.k;
  block_weights(
      threads, g, [&](std::size_t o, std::size_t c) { return w.data + (o * g.cin + c) * kk; }, false, blocked);
  convolve(threads, g, x, TileOutput{bias.empty() ? nullptr : bias.data, accumulate, relu}, y, blocked);
}

void direct_backward_filter(int threads, const Conv2dDesc& d, const Tensor& x, const Tensor& dy, Tensor dw,
                            Tensor dbias, Workspace ws) {
  require_applies(d, x.shape, DirectPass::backward_filter, "conv2d_backward_filter");
  if (along_pixels(d, x.shape, DirectPass::backward_filter))
    return pixel_backward_filter(threads, d, x, dy, dw, dbias, ws);
  const Geometry g = forward_geometry(d, x.shape);
  const auto images = static_cast<std::size_t>(x.n());
  if (few_channels(d, x.shape) != FewChannels::no) {
    require_workspace_floats(ws, image_filter_workspace_floats(g, images, threads), "conv2d_backward_filter");
    return image_backward_filter(threads, g, x, dy, dw, dbias, static_cast<float*>(ws.data));
  }
  require_workspace_floats(ws, filter_workspace_floats(g, images, threads), "conv2d_backward_filter");
  const TileKernels& kernels = host_tiles();
  const FilterTiles tiles = kernels.filter_tiles(g);
  if (filter_splits_outputs(g, tiles, threads))
    return filter_by_outputs(threads, g, kernels, tiles, x, dy, dw, dbias, static_cast<float*>(ws.data));
  const std::size_t kk = g.k * g.k, share = filter_share_floats(g, images), weights = g.cout * g.cin * kk;
  const std::size_t group = filter_group(g);
  auto* shares = static_cast<float*>(ws.data);
  const int used = parallel_ranges(threads, images, [&](int t, std::size_t first, std::size_t end) {
    float* partial = shares + static_cast<std::size_t>(t) * share;  // [tap][cout][cin], then [cout]
    float* blocked = partial + filter_partial_floats(g);
    std::memset(partial, 0, (weights + g.cout) * sizeof(float));
    for (std::size_t b = first; b < end; b += group) {
      const std::size_t count = std::min(group, end - b);
      for (std::size_t n = 0; n < count; ++n)
        kernels.block_image(g, x.data + (b + n) * x.sample_elements(), blocked + n * g.image_floats());
      const float* grad = dy.data + b * dy.sample_elements();
      add_group(g, tiles, blocked, grad, dy.sample_elements(), count, 0, g.cout, !dbias.empty(), partial);
    }
  });
  // The threads' partials added in thread order: dw[o][c][tap] += the sum of partial[tap][o][c].
  parallel_ranges(threads, g.cout, [&](int, std::size_t first, std::size_t end) {
    for (std::size_t o = first; o < end; ++o) {
      for (std::size_t tap = 0; tap < kk; ++tap)  // the partials' rows read along, dw's row written across
        for (std::size_t c = 0; c < g.cin; ++c) {
          float sum = 0.f;
          for (int t = 0; t < used; ++t)
            sum += shares[static_cast<std::size_t>(t) * share + (tap * g.cout + o) * g.cin + c];
          dw.data[(o * g.cin + c) * kk + tap] += sum;
        }
      if (dbias.empty()) continue;
      float sum = 0.f;
      for (int t = 0; t < used; ++t) sum += shares[static_cast<std::size_t>(t) * share + weights + o];
      dbias.data[o] += sum;
    }
  });
}

// dx = dy convolved with each filter turned half a circle, its channels swapped.
void direct_backward_data(int threads, const Conv2dDesc& d, const Tensor& dy, const Tensor& w, Tensor dx,
                          bool accumulate, Workspace ws) {
  require_applies(d, dx.shape, DirectPass::backward_data, "conv2d_backward_data");
  if (d.stride == 2) {  // Note [Stride-2 backward-data in phases]
    const Phases ph = phases_of(d, dy.shape, dx.shape);
    require_workspace_floats(ws, phases_workspace_floats(ph, static_cast<std::size_t>(dx.n()), threads),
                             "conv2d_backward_data");
    auto* blocked = static_cast<float*>(ws.data);
    block_phase_weights(threads, ph, w.data, blocked);
    return phases_backward_data(threads, ph, dy, accumulate, dx, blocked);
  }
  const Geometry g = adjoint_geometry(d, dy.shape, dx.shape);
  require_workspace_floats(ws, workspace_floats(g, static_cast<std::size_t>(dx.n()), threads), "conv2d_backward_data");
  auto* blocked = static_cast<float*>(ws.data);
  const std::size_t kk = g.k * g.k;
  // Output o of the adjoint is dx's channel o, its input c is dy's channel c: the forward weight w[c][o].
  block_weights(
      threads, g, [&](std::size_t o, std::size_t c) { return w.data + (c * g.cout + o) * kk; }, true, blocked);
  convolve(threads, g, dy, TileOutput{nullptr, accumulate}, dx, blocked);
}

}  // namespace cnn::cpu
