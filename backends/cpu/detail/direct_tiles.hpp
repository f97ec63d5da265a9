#pragma once
// What the direct convolution's blocked passes (cpu_direct_conv.cpp) share with their tile kernels:
// a convolution's geometry, the blocked layouts, and one instruction set's kernels. The AVX-512
// kernels live beside the passes; AVX2's in cpu_direct_tiles_avx2.cpp. Both read the same blocked
// image and weights, leave the same sums in the same places and sum each value in the same chain
// of fused multiply-adds (Note [Direct convolution in blocks of channels], Note [Direct
// backward-filter]): the same bits.
#include <algorithm>
#include <cstddef>

#include "backends/cpu/detail/gemm.hpp"

namespace cnn::cpu::direct {

constexpr std::size_t kLanes = 16;      // input channels a block (an AVX-512 vector's floats)
constexpr std::size_t kWideBlock = 64;  // output channels of the widest block

// Output channels a block of the weights takes: the widest of 64, 32 or 16 that divides them.
inline std::size_t out_block_of(std::size_t cout) {
  for (std::size_t block = kWideBlock; block > kLanes; block /= 2)
    if (cout % block == 0) return block;
  return kLanes;
}

// One convolution: cin and cout channels, an h x w input padded by pad on each side, a k x k
// kernel at `stride`; a block's output channels.
struct Geometry {
  std::size_t cin, cout, h, w, k, pad, stride;
  std::size_t out_block = out_block_of(cout);
  std::size_t blocks() const { return cin / kLanes; }
  std::size_t hp() const { return h + 2 * pad; }
  std::size_t wp() const { return w + 2 * pad; }
  std::size_t hout() const { return (hp() - k) / stride + 1; }
  std::size_t wout() const { return (wp() - k) / stride + 1; }
  std::size_t image_floats() const { return aligned_floats(cin * hp() * wp()); }
  std::size_t share_floats() const { return image_floats() + hout() * wout() * out_block; }  // + the sums
  std::size_t block_floats() const { return cin * k * k * out_block; }  // one block of outputs' weights
  std::size_t weight_floats() const { return aligned_floats(cout * cin * k * k); }
};

// The first pixel of `wide` whose input column (first + q) * stride + j - pad lies inside the
// image, and the end of those pixels, for an output row's pixels from `first` and tap column j.
struct Inside {
  std::size_t lo, hi;
};
inline Inside inside(std::size_t first, std::size_t wide, std::size_t j, std::size_t pad, std::size_t stride,
                     std::size_t w) {
  if (j > w + pad - 1) return {0, 0};             // every pixel's column lies past the image
  const std::size_t before = first * stride + j;  // the first pixel's column in the padded image
  const std::size_t lo = before < pad ? (pad - before + stride - 1) / stride : 0;
  const std::size_t end = (w + pad - 1 - j) / stride + 1;  // the outputs before `end` read inside on the right
  return {std::min(lo, wide), end > first ? std::min(wide, end - first) : 0};
}

// What the sums become in the output: y = (accumulate ? y : 0) + sum + bias (when given), then with
// relu max(that, 0), as relu_forward gives it (never with accumulate).
struct TileOutput {
  const float* bias = nullptr;
  bool accumulate = false;
  bool relu = false;
};

// Backward-data's phase tile (Note [Stride-2 backward-data in phases]): `image` at its first
// pixel's first tap in block 0, the phase's weights, its columns of taps, and the rows [top,
// bottom) of taps that lie inside dy.
struct PhaseTile {
  const float* image;
  const float* weights;
  std::size_t columns, taps, top, bottom;
};

// A tile of `wide` output pixels of row oh from ow, every output of one block, summed over the
// channel blocks [first, end) into sums[pixel][out_block]: from zero for the first blocks, else
// from what the blocks before left there. The taps on the padding may be skipped.
using TileKernel = void (*)(const Geometry& g, const float* image, const float* weights, std::size_t oh,
                            std::size_t ow, std::size_t first, std::size_t end, float* sums);
// A phase's tile: its pixels' sums 2 x out_block floats apart.
using PhaseKernel = void (*)(const Geometry& g, const PhaseTile& tile, std::size_t first, std::size_t end,
                             float* sums);

// Backward-filter's tile (Note [Direct backward-filter]): outputs from o0 x vectors of 16 input
// channels from block cb0, tap (i, j), over `count` images blocked side by side (image_floats()
// apart) and their dy (`dy_stride` apart): added to partial[o][c] (rows cin apart).
using FilterKernel = void (*)(const Geometry& g, const float* images, const float* dy, std::size_t dy_stride,
                              std::size_t count, std::size_t i, std::size_t j, std::size_t o0, std::size_t cb0,
                              float* partial);

// Backward-filter's tiles: kernels[outs - 1] for a tile of `outs` outputs (the last may have
// fewer) x `vectors` blocks of 16 input channels; the outputs cut into tiles of equal size.
struct FilterTiles {
  const FilterKernel* kernels;
  std::size_t vectors, outs;
};

// A row's kernels by width, 1 to `wide` pixels: kernels[width - 1].
template <class Kernel>
struct KernelRow {
  const Kernel* kernels;
  std::size_t wide;
  bool even = false;  // a row cut into tiles of equal width (one apart), not the widest and the rest
  // The width of the tile from pixel `at` of a row of `pixels`.
  std::size_t width_at(std::size_t at, std::size_t pixels) const {
    if (!even) return std::min(wide, pixels - at);
    const std::size_t tiles = (pixels + wide - 1) / wide, narrow = pixels / tiles, wider = pixels % tiles;
    return at < wider * (narrow + 1) ? narrow + 1 : narrow;
  }
};

// One instruction set's kernels.
struct TileKernels {
  // One image [cin][h][w] into [cin/16][hp][wp][16], its border zero.
  void (*block_image)(const Geometry& g, const float* x, float* blocked);
  // A tile's sums, [wide][out_block] from pixel p0 of the map, into the NCHW output's channels from
  // o0 (a map of `pixels`).
  void (*write_tile)(const float* sums, std::size_t wide, std::size_t out_block, std::size_t pixels, std::size_t p0,
                     std::size_t o0, TileOutput to, float* y);
  KernelRow<TileKernel> (*tile_row)(const Geometry& g);  // by the block's outputs and the stride (1 or 2)
  KernelRow<PhaseKernel> (*phase_row)(const Geometry& g);
  FilterTiles (*filter_tiles)(const Geometry& g);
};

// AVX2's (cpu_direct_tiles_avx2.cpp).
const TileKernels& avx2_tiles();

}  // namespace cnn::cpu::direct
