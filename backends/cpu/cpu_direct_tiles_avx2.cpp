// The direct convolution's tile kernels on AVX2 (detail/direct_tiles.hpp): the AVX-512 kernels'
// blocked layouts and sums, in 16 registers of 8 floats where those have 32 of 16.
//
// A tile is up to 6 output pixels of one row x 16 output channels (two vectors): 12 accumulators,
// the two vectors of weights of an input channel and a broadcast of a pixel's input, 12 fused
// multiply-adds for 8 loads. A block of 32 or 64 outputs runs as 2 or 4 such tiles over the same
// pixels, which stay in L1 between them. Each output's sum is the AVX-512 kernel's chain (over the
// channel blocks, the taps and a block's 16 channels, in that order, from zero), and the taps on
// the padding are skipped only where a skipped term is an exact zero, so the two give the same
// bits for finite values (but for the sign of a sum that underflowed to zero). Backward-filter's
// tile is 6 outputs x one block of 16 input channels of one tap, each value's sum over the images
// and pixels in order, as AVX-512's.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <utility>

#include "backends/cpu/detail/cpu_isa.hpp"
#include "backends/cpu/detail/direct_tiles.hpp"
#include "backends/cpu/detail/transpose_8x8.hpp"

namespace cnn::cpu::direct {
namespace {

constexpr std::size_t kWide = 6;  // a tile's pixels

// The lanes of a row's first `count` (1 to 8) floats, for the masked loads and stores.
CNN_TARGET_AVX2 __m256i first_lanes(std::size_t count) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

CNN_TARGET_AVX2 void block_image_avx2(const Geometry& g, const float* x, float* blocked) {
  const std::size_t wp = g.wp(), row = wp * kLanes, plane = g.hp() * row, hw = g.h * g.w;
  const __m256 zero = _mm256_setzero_ps();
  for (std::size_t b = 0; b < g.blocks(); ++b) {
    float* at = blocked + b * plane;
    std::memset(at, 0, g.pad * row * sizeof(float));                        // the rows above
    std::memset(at + (g.pad + g.h) * row, 0, g.pad * row * sizeof(float));  // and below
    for (std::size_t i = g.pad; i < g.pad + g.h; ++i)
      for (std::size_t q = 0; q < g.pad; ++q)  // each row's first and last pixels
        for (std::size_t half = 0; half < kLanes; half += 8) {
          _mm256_storeu_ps(at + i * row + q * kLanes + half, zero);
          _mm256_storeu_ps(at + i * row + (g.pad + g.w + q) * kLanes + half, zero);
        }
  }
  for (std::size_t c0 = 0; c0 < g.cin; c0 += 8)
    for (std::size_t i = 0; i < g.h; ++i) {
      float* to = blocked + (c0 / kLanes) * plane + ((i + g.pad) * wp + g.pad) * kLanes + c0 % kLanes;
      const float* from = x + c0 * hw + i * g.w;
      for (std::size_t j = 0; j < g.w; j += 8) {
        const std::size_t count = std::min<std::size_t>(8, g.w - j);
        const __m256i mask = first_lanes(count);
        __m256 square[8];
        for (std::size_t c = 0; c < 8; ++c)
          square[c] = count == 8 ? _mm256_loadu_ps(from + c * hw + j) : _mm256_maskload_ps(from + c * hw + j, mask);
        transpose_8x8_avx(square);
        for (std::size_t q = 0; q < count; ++q) _mm256_storeu_ps(to + (j + q) * kLanes, square[q]);
      }
    }
}

CNN_TARGET_AVX2 void write_tile_avx2(const float* sums, std::size_t wide, std::size_t out_block, std::size_t pixels,
                                     std::size_t p0, std::size_t o0, TileOutput to, float* y) {
  for (std::size_t q0 = 0; q0 < wide; q0 += 8) {
    const std::size_t count = std::min<std::size_t>(8, wide - q0);
    const __m256i mask = first_lanes(count);
    const bool whole = count == 8;  // masked stores take many micro-ops on AMD cores: a row's last alone
    for (std::size_t c0 = 0; c0 < out_block; c0 += 8) {
      __m256 square[8];
      for (std::size_t q = 0; q < 8; ++q)
        square[q] = q < count ? _mm256_loadu_ps(sums + (q0 + q) * out_block + c0) : _mm256_setzero_ps();
      transpose_8x8_avx(square);
      for (std::size_t c = 0; c < 8; ++c) {
        float* out = y + (o0 + c0 + c) * pixels + p0 + q0;
        __m256 value = square[c];
        if (to.accumulate) value = _mm256_add_ps(whole ? _mm256_loadu_ps(out) : _mm256_maskload_ps(out, mask), value);
        if (to.bias != nullptr) value = _mm256_add_ps(value, _mm256_set1_ps(to.bias[o0 + c0 + c]));
        if (to.relu) value = _mm256_max_ps(value, _mm256_setzero_ps());  // a NaN or -0 gives +0, as relu_forward
        if (whole)
          _mm256_storeu_ps(out, value);
        else
          _mm256_maskstore_ps(out, mask, value);
      }
    }
  }
}

// The multiply-adds of one tap over a block's 16 channels for the tile's pixels [Lo, Hi), the
// pixels Step floats apart; the weights of 16 outputs, an input channel's out_block floats apart.
template <std::size_t Wide, std::size_t Step, std::size_t Lo, std::size_t Hi>
CNN_TARGET_AVX2 inline __attribute__((always_inline)) void tap_avx2(__m256 (&acc)[Wide][2], const float* in,
                                                                    const float* w, std::size_t out_block) {
  for (std::size_t c = 0; c < kLanes; ++c) {
    const __m256 low = _mm256_loadu_ps(w + c * out_block), high = _mm256_loadu_ps(w + c * out_block + 8);
#pragma GCC unroll 6
    for (std::size_t q = Lo; q < Hi; ++q) {
      const __m256 x = _mm256_broadcast_ss(in + q * Step + c);
      acc[q][0] = _mm256_fmadd_ps(x, low, acc[q][0]);
      acc[q][1] = _mm256_fmadd_ps(x, high, acc[q][1]);
    }
  }
}

// Note [Accumulators in registers]: the loops that load and store a tile's accumulators are
// unrolled by pragma. Left to GCC's late unrolling they are still loops when it decides which
// arrays become registers, and it keeps the array in memory: the multiply-adds' loop then stores
// every accumulator after each multiply-add (12 stores for 12 multiply-adds, at one store a
// cycle: half the speed; objdump shows them as ymm stores to the stack). A loop over the rows
// of a tile that a run-time count ends does the same. The AVX-512 tiles (cpu_direct_conv.cpp) run
// at a third of their speed so, with the same bits; tests/backends/cpu/accumulators_in_registers.py
// checks every kernel's loops in the built library.
template <std::size_t Wide>
CNN_TARGET_AVX2 inline __attribute__((always_inline)) void load_sums(__m256 (&acc)[Wide][2], bool zero,
                                                                     const float* sums, std::size_t apart) {
#pragma GCC unroll 16
  for (std::size_t q = 0; q < Wide; ++q)
#pragma GCC unroll 2
    for (std::size_t h = 0; h < 2; ++h)
      acc[q][h] = zero ? _mm256_setzero_ps() : _mm256_loadu_ps(sums + q * apart + 8 * h);
}

template <std::size_t Wide>
CNN_TARGET_AVX2 inline __attribute__((always_inline)) void store_sums(__m256 (&acc)[Wide][2], float* sums,
                                                                      std::size_t apart) {
#pragma GCC unroll 16
  for (std::size_t q = 0; q < Wide; ++q)
#pragma GCC unroll 2
    for (std::size_t h = 0; h < 2; ++h) _mm256_storeu_ps(sums + q * apart + 8 * h, acc[q][h]);
}

// Wide pixels x the 16 outputs whose weights start at `weights` (and whose sums at `sums`), as the
// AVX-512 tile (direct_tile_avx512) sums them.
template <std::size_t Wide, std::size_t Stride>
CNN_TARGET_AVX2 void sixteen_avx2(const Geometry& g, const float* image, const float* weights, std::size_t oh,
                                  std::size_t ow, std::size_t first, std::size_t end, float* sums) {
  const std::size_t out_block = g.out_block;
  __m256 acc[Wide][2];
  load_sums(acc, first == 0, sums, out_block);
  const std::size_t wp = g.wp(), plane = g.hp() * wp * kLanes, kk = g.k * g.k, row = oh * Stride;
  const std::size_t top = row < g.pad ? g.pad - row : 0, bottom = std::min(g.k, g.h + g.pad - row);
  std::array<Inside, 7> columns{};
  for (std::size_t j = 0; j < g.k && j < columns.size(); ++j) columns[j] = inside(ow, Wide, j, g.pad, Stride, g.w);
  for (std::size_t cb = first; cb < end; ++cb) {
    const float* block = image + cb * plane + (row * wp + ow * Stride) * kLanes;
    const float* taps = weights + cb * kk * kLanes * out_block;
    for (std::size_t i = top; i < bottom; ++i)
      for (std::size_t j = 0; j < g.k; ++j) {
        const float* in = block + (i * wp + j) * kLanes;
        const float* w = taps + (i * g.k + j) * kLanes * out_block;
        const Inside q = columns[j];
        constexpr std::size_t kStep = Stride * kLanes;
        if (q.lo == 1 && q.hi == Wide)
          tap_avx2<Wide, kStep, 1, Wide>(acc, in, w, out_block);
        else if (q.lo == 0 && q.hi + 1 == Wide)
          tap_avx2<Wide, kStep, 0, Wide - 1>(acc, in, w, out_block);
        else
          tap_avx2<Wide, kStep, 0, Wide>(acc, in, w, out_block);
      }
  }
  store_sums(acc, sums, out_block);
}

// The tile of every output of the block: its 16-output parts one after the other.
template <std::size_t Wide, std::size_t Stride>
void tile_avx2(const Geometry& g, const float* image, const float* weights, std::size_t oh, std::size_t ow,
               std::size_t first, std::size_t end, float* sums) {
  for (std::size_t o = 0; o < g.out_block; o += kLanes)
    sixteen_avx2<Wide, Stride>(g, image, weights + o, oh, ow, first, end, sums + o);
}

template <std::size_t Wide>
CNN_TARGET_AVX2 void phase_sixteen_avx2(const Geometry& g, const PhaseTile& tile, std::size_t first, std::size_t end,
                                        float* sums) {
  const std::size_t out_block = g.out_block, apart = 2 * out_block;
  __m256 acc[Wide][2];
  load_sums(acc, first == 0, sums, apart);
  const std::size_t wp = g.wp(), plane = g.hp() * wp * kLanes;
  for (std::size_t cb = first; cb < end; ++cb) {
    const float* block = tile.image + cb * plane;
    const float* taps = tile.weights + cb * tile.taps * kLanes * out_block;
    for (std::size_t t = tile.top; t < tile.bottom; ++t)
      for (std::size_t u = 0; u < tile.columns; ++u)
        tap_avx2<Wide, kLanes, 0, Wide>(acc, block + (t * wp + u) * kLanes,
                                        taps + (t * tile.columns + u) * kLanes * out_block, out_block);
  }
  store_sums(acc, sums, apart);
}

template <std::size_t Wide>
void phase_tile_avx2(const Geometry& g, const PhaseTile& tile, std::size_t first, std::size_t end, float* sums) {
  for (std::size_t o = 0; o < g.out_block; o += kLanes) {
    PhaseTile part = tile;
    part.weights += o;
    phase_sixteen_avx2<Wide>(g, part, first, end, sums + o);
  }
}

// Backward-filter's tile (direct_filter_avx512's sums in its order): Outs outputs x one block of
// 16 input channels, two vectors an output, up to 6 outputs in 12 accumulators; per pixel the
// block's two vectors of the input and a broadcast of each output's dy.
template <std::size_t Outs>
CNN_TARGET_AVX2 void filter_avx2(const Geometry& g, const float* images, const float* dy, std::size_t dy_stride,
                                 std::size_t count, std::size_t i, std::size_t j, std::size_t o0, std::size_t cb0,
                                 float* partial) {
  __m256 acc[Outs][2];
  load_sums(acc, false, partial, g.cin);
  const std::size_t wp = g.wp(), plane = g.hp() * wp * kLanes, hout = g.hout(), wout = g.wout(), pixels = hout * wout;
  const Inside rows = inside(0, hout, i, g.pad, g.stride, g.h), columns = inside(0, wout, j, g.pad, g.stride, g.w);
  for (std::size_t n = 0; n < count; ++n) {
    const float* image = images + n * g.image_floats() + cb0 * plane;
    const float* grad = dy + n * dy_stride + o0 * pixels;
    for (std::size_t oh = rows.lo; oh < rows.hi; ++oh)
      for (std::size_t ow = columns.lo; ow < columns.hi; ++ow) {
        const float* in = image + ((oh * g.stride + i) * wp + ow * g.stride + j) * kLanes;
        const __m256 low = _mm256_loadu_ps(in), high = _mm256_loadu_ps(in + 8);
        const std::size_t p = oh * wout + ow;
#pragma GCC unroll 6
        for (std::size_t r = 0; r < Outs; ++r) {
          const __m256 d = _mm256_broadcast_ss(grad + r * pixels + p);
          acc[r][0] = _mm256_fmadd_ps(d, low, acc[r][0]);
          acc[r][1] = _mm256_fmadd_ps(d, high, acc[r][1]);
        }
      }
  }
  store_sums(acc, partial, g.cin);
}

template <std::size_t Stride, std::size_t... Wide>
constexpr std::array<TileKernel, sizeof...(Wide)> tile_kernels(std::index_sequence<Wide...>) {
  return {tile_avx2<Wide + 1, Stride>...};
}
template <std::size_t... Wide>
constexpr std::array<PhaseKernel, sizeof...(Wide)> phase_kernels(std::index_sequence<Wide...>) {
  return {phase_tile_avx2<Wide + 1>...};
}
constexpr auto kStride1 = tile_kernels<1>(std::make_index_sequence<kWide>());
constexpr auto kStride2 = tile_kernels<2>(std::make_index_sequence<kWide>());
constexpr auto kPhases = phase_kernels(std::make_index_sequence<kWide>());
template <std::size_t... Outs>
constexpr std::array<FilterKernel, sizeof...(Outs)> filter_kernels(std::index_sequence<Outs...>) {
  return {filter_avx2<Outs + 1>...};
}
constexpr std::size_t kFilterOuts = 6;
constexpr auto kFilters = filter_kernels(std::make_index_sequence<kFilterOuts>());

// Rows cut evenly: a tile of 1 or 2 pixels would run at a third of a whole one's speed.
KernelRow<TileKernel> tile_row_avx2(const Geometry& g) {
  return {(g.stride == 1 ? kStride1 : kStride2).data(), kWide, true};
}
KernelRow<PhaseKernel> phase_row_avx2(const Geometry&) { return {kPhases.data(), kWide, true}; }

// The outputs cut into tiles of equal size, one block of input channels each.
FilterTiles filter_tiles_avx2(const Geometry& g) {
  const std::size_t tiles = (g.cout + kFilterOuts - 1) / kFilterOuts;
  return {kFilters.data(), 1, (g.cout + tiles - 1) / tiles};
}

}  // namespace

const TileKernels& avx2_tiles() {
  static constexpr TileKernels kernels{block_image_avx2, write_tile_avx2, tile_row_avx2, phase_row_avx2,
                                       filter_tiles_avx2};
  return kernels;
}

}  // namespace cnn::cpu::direct
