// The Winograd convolution on the CPU (backends/cpu/detail/winograd_conv.hpp, Note [Winograd
// tiles] in winograd_tiles.hpp). The work is cut into tile rows (one image's tiles side by side,
// a tile tall), spread over the threads; a thread takes its rows a chunk at a time: it
// transforms the chunk's tiles for every channel, runs one product per point of the tile (36 in
// F(4x4), 16 in F(2x2): our gemm, packing from the thread's share of the workspace), then
// transforms the products back. The weights are transformed once a call for each block of
// output channels, before the threads start. Backward-filter sums dU = dM V^T in each thread's
// own share, adds the shares in thread order and turns the sum back into dw.
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include "backends/cpu/detail/cpu_isa.hpp"
#include "backends/cpu/detail/gemm.hpp"
#include "backends/cpu/detail/parallel.hpp"
#include "backends/cpu/detail/workspace_check.hpp"
#include "backends/cpu/detail/winograd_conv.hpp"
#include "backends/cpu/detail/winograd_tiles.hpp"

#define CNN_ISA_KERNELS "backends/cpu/detail/winograd_tiles.inl"
#define CNN_ISA_REGION 0
#include "backends/cpu/detail/isa_region.hpp"
#define CNN_ISA_REGION 1
#include "backends/cpu/detail/isa_region.hpp"
#define CNN_ISA_REGION 2
#include "backends/cpu/detail/isa_region.hpp"

namespace cnn::cpu {
namespace {

// One region's transforms of one tile size, for the host's instructions (F(4x4) has no gradient
// transform: backward-filter runs F(2x2)).
struct Transforms {
  decltype(&isa_portable::winograd::forward_input_tiles) input;
  decltype(&isa_portable::winograd::forward_output_tiles) output;
  decltype(&isa_portable::winograd::accurate_gradient_tiles) gradient;
};

#define CNN_WINOGRAD_TRANSFORMS(isa, tile)                                                                        \
  ((tile) == 4 ? Transforms{isa::winograd::forward_input_tiles, isa::winograd::forward_output_tiles, nullptr}     \
               : Transforms{isa::winograd::accurate_input_tiles, isa::winograd::accurate_output_tiles,            \
                            isa::winograd::accurate_gradient_tiles})

Transforms transforms(std::size_t tile) {
  switch (region_for(CpuIsa::avx512)) {
#if CNN_ISA_REGIONS
    case CpuIsa::avx512: return CNN_WINOGRAD_TRANSFORMS(isa_avx512, tile);
    case CpuIsa::avx2: return CNN_WINOGRAD_TRANSFORMS(isa_avx2, tile);
#endif
    default: return CNN_WINOGRAD_TRANSFORMS(isa_portable, tile);
  }
}

// The tile size of each pass (Note [Winograd tiles]).
constexpr std::size_t kForwardTile = 4, kDataTile = 2, kFilterTile = 2;

// Tiles a chunk aims at: the products' columns (several of the gemm's 48-wide panels, so that
// each product's packed U is used across them); 48 to 384 measured alike on resnet18's layers.
constexpr std::size_t kChunkTiles = 96;

std::size_t ceil_div(std::size_t a, std::size_t b) { return (a + b - 1) / b; }

// Note [Output channels in blocks]: the transformed weights U take points x out x in floats (36
// x 512 x 512: 38 MB), backward-filter's sums as many per thread, however small the batch. The
// passes run the output channels a block at a time, the largest block whose U (and sums) fit in
// the larger of the layer's activations, so that no step's peak grows by more than about one
// activation; each block transforms the inputs again, a few percent of a block's products where
// the channels are many enough to need blocks. Below 32 channels a block, the backend keeps
// im2col (winograd_applies).
constexpr std::size_t kLeastBlock = 32, kBlockStep = 16;

// A convolution as these passes run it: `in` channels of h x w images padded by `pad` into `out`
// channels of hout x wout, over `images` images on `threads` threads, in F(tile x tile, 3x3),
// `block` output channels at a time.
struct Plan {
  std::size_t in, out, h, w, pad, hout, wout, images;
  std::size_t tile;                  // m: 4 or 2
  bool filter;                       // backward-filter's plan (else a forward pass's)
  std::size_t tile_rows, tile_cols;  // of one image
  int threads;
  int ranges;              // parallel_ranges' count over the tile rows
  std::size_t chunk_rows;  // tile rows a chunk takes, at most
  std::size_t block;       // output channels a block takes, at most
  bool fits;               // whether blocks of at least kLeastBlock keep U within the activations' size

  Plan(std::size_t in_, std::size_t out_, std::size_t h_, std::size_t w_, std::size_t pad_, std::size_t images_,
       std::size_t tile_, bool filter_, int threads_)
      : in(in_), out(out_), h(h_), w(w_), pad(pad_), hout(h_ + 2 * pad_ - 2), wout(w_ + 2 * pad_ - 2),
        images(images_), tile(tile_), filter(filter_), tile_rows(ceil_div(hout, tile_)), tile_cols(ceil_div(wout, tile_)),
        threads(threads_), ranges(range_threads(threads_, units())) {
    const std::size_t most_rows = ceil_div(units(), static_cast<std::size_t>(ranges));
    chunk_rows = std::clamp<std::size_t>(ceil_div(kChunkTiles, tile_cols), 1, std::max<std::size_t>(most_rows, 1));
    const std::size_t activation = images * std::max(in * h * w, out * hout * wout);
    const std::size_t per_channel = points() * in * (filter ? static_cast<std::size_t>(ranges) : 1);
    block = std::min(out, activation / std::max<std::size_t>(per_channel, 1));
    if (block < out) block = block / kBlockStep * kBlockStep;
    fits = block >= std::min(out, kLeastBlock);
    block = std::max(block, std::min(out, kBlockStep));  // where called all the same (the tests)
  }
  std::size_t points() const { return (tile + 2) * (tile + 2); }
  std::size_t units() const { return images * tile_rows; }  // tile rows of every image
  std::size_t chunk_tiles() const { return chunk_rows * tile_cols; }
  std::size_t weights_floats() const { return aligned_floats(points() * in * block); }
};

// The plans of a convolution of x: its forward pass, its backward-filter, and backward-data's
// adjoint convolution (dy's channels in, dx's out, padded by 2 - pad).
Plan forward_plan(const Conv2dDesc& d, const Shape& x, int threads) {
  return Plan(static_cast<std::size_t>(x[1]), static_cast<std::size_t>(d.out_channels), static_cast<std::size_t>(x[2]),
              static_cast<std::size_t>(x[3]), static_cast<std::size_t>(d.padding), static_cast<std::size_t>(x[0]),
              kForwardTile, false, threads);
}
Plan filter_plan(const Conv2dDesc& d, const Shape& x, int threads) {
  return Plan(static_cast<std::size_t>(x[1]), static_cast<std::size_t>(d.out_channels), static_cast<std::size_t>(x[2]),
              static_cast<std::size_t>(x[3]), static_cast<std::size_t>(d.padding), static_cast<std::size_t>(x[0]),
              kFilterTile, true, threads);
}
Plan adjoint_plan(const Conv2dDesc& d, const Shape& y, int threads) {
  return Plan(static_cast<std::size_t>(y[1]), static_cast<std::size_t>(d.in_channels), static_cast<std::size_t>(y[2]),
              static_cast<std::size_t>(y[3]), static_cast<std::size_t>(2 - d.padding), static_cast<std::size_t>(y[0]),
              kDataTile, false, threads);
}

// Note [Points a line apart]: a tile transform writes (input) or reads (output) the 16 or 36 points
// of a row of tiles at once, one row of V or M per point, each the channels' rows x tiles floats
// after the one before. Where that is a multiple of 4 KiB (unet's 64x64 maps: a chunk of 96 tiles
// times any multiple of 32 channels) the rows all fall in the same sets of the L1 cache, and a load
// waits on a store to another row at the same address within its page: unet's output transforms
// ran twice as long, its forward convolutions up to 1.2 times (conv_peak). Points an odd number of
// cache lines apart spread over the sets (no two of a tile's points are a multiple of 64 lines
// apart); the values and their order are the same.
std::size_t point_stride(std::size_t rows, std::size_t tiles) {
  const std::size_t lines = (rows * tiles + 15) / 16;  // of 16 floats
  return (lines | 1) * 16;
}

// One thread's share of the workspace, in floats (each part 64-byte aligned): the chunk's
// transformed inputs V [xi][in][tiles] and products M (or dM) [xi][out][tiles], the transforms'
// scratch, the gemm's packing, and (backward-filter) its sum of dU [xi][out][in].
struct Share {
  float *v, *m, *scratch, *sums;
  Packing packing;
};

struct ShareSizes {
  std::size_t v, m, scratch, packing, sums;
  std::size_t total() const { return v + m + scratch + packing + sums; }
};

ShareSizes share_sizes(const Plan& p) {
  ShareSizes s{};
  s.v = aligned_floats(p.points() * point_stride(p.in, p.chunk_tiles()));
  s.m = aligned_floats(p.points() * point_stride(p.block, p.chunk_tiles()));
  s.scratch = aligned_floats(
      winograd::scratch_floats(static_cast<int>(p.tile), static_cast<int>(p.tile_cols), static_cast<int>(p.chunk_rows)));
  for (std::size_t rows = 1; rows <= p.chunk_rows; ++rows) {  // every chunk's size, the last one's included
    const std::size_t tiles = rows * p.tile_cols;
    for (const std::size_t rows_of_c : {p.block, p.out % p.block})  // a whole block, the last one
      if (rows_of_c > 0)
        s.packing = std::max(s.packing, p.filter ? gemm_packing_floats(rows_of_c, p.in, tiles)
                                                     : gemm_packing_floats(rows_of_c, tiles, p.in));
  }
  s.sums = p.filter ? aligned_floats(p.points() * p.block * p.in) : 0;
  return s;
}

Share share_of(const Plan& p, float* shares, int range) {
  const ShareSizes s = share_sizes(p);
  float* at = shares + static_cast<std::size_t>(range) * s.total();
  return {at, at + s.v, at + s.v + s.m, at + s.v + s.m + s.scratch + s.packing,
          Packing{at + s.v + s.m + s.scratch, s.packing}};
}

// ---- Weights ----

// Note [Weights transformed as a product]: U = G g G^T is linear in the filter's 9 values,
// U_xi = sum over taps of G[i][u] G[j][v] g[u][v] = (T g)_xi with T [points x 9], so every filter
// of a layer is transformed by one matrix product, U [points x filters] = T g^T, whose rows are
// already the layout the products read (U_xi [out x in]); and dw += dU^T T turns the summed
// gradients back. Filter by filter in scalar code, resnet50's 512-channel layers spent 12% of a
// step here.
template <int M>
struct TapMatrix {
  static constexpr int a = M + 2;
  float t[a * a * 9];
  constexpr TapMatrix() : t{} {
    using G = winograd::Tiles<M>;
    for (int i = 0; i < a; ++i)
      for (int j = 0; j < a; ++j)
        for (int u = 0; u < 3; ++u)
          for (int v = 0; v < 3; ++v) t[(i * a + j) * 9 + u * 3 + v] = G::G[i][u] * G::G[j][v];
  }
};
constexpr TapMatrix<4> kTaps4;
constexpr TapMatrix<2> kTaps2;
const float* taps(const Plan& p) { return p.tile == 4 ? kTaps4.t : kTaps2.t; }

// Packing for the product that transforms `filters` filters (forward) or turns their gradients
// back (backward-filter), on `threads` threads.
std::size_t weights_packing_floats(const Plan& p) {
  std::size_t most = 0;
  for (const std::size_t rows : {p.block, p.out % p.block})  // a whole block's filters, the last one's
    if (rows > 0) {
      const std::size_t filters = rows * p.in;
      most = std::max(most, p.filter ? parallel_gemm_packing_floats(p.threads, filters, 9, p.points())
                                         : parallel_gemm_packing_floats(p.threads, p.points(), filters, 9));
    }
  return most;
}

// U [xi][filters] = T of each filter, filters stored [filters x 9].
void transform_weights(const Plan& p, std::size_t filters, const float* w, float* u, Packing packing) {
  parallel_gemm(p.threads, p.points(), filters, 9, GemmOperand{taps(p), 9}, GemmOperand{w, 9, true},
                GemmOutput{u, filters}, packing);
}

// dw [filters x 9] += dU^T T, dU [xi][filters].
void add_filter_gradient(const Plan& p, std::size_t filters, const float* du, float* dw, Packing packing) {
  parallel_gemm(p.threads, filters, 9, p.points(), GemmOperand{du, filters, true}, GemmOperand{taps(p), 9},
                GemmOutput{dw, 9, true}, packing);
}

// ---- The passes ----

// One chunk's tile rows [first, last) of every input channel into V, an image's run of them at a
// time.
void transform_inputs(const Transforms& kernels, const Plan& p, const float* x, std::size_t x_stride,
                      std::size_t first, std::size_t last, const Share& s) {
  const std::size_t tiles = (last - first) * p.tile_cols;
  for (std::size_t c = 0; c < p.in; ++c)
    for (std::size_t unit = first; unit < last;) {
      const std::size_t image = unit / p.tile_rows, tile_row = unit % p.tile_rows;
      const std::size_t run = std::min(last, (image + 1) * p.tile_rows) - unit;  // tile rows of this image
      const winograd::TileRow row{x + image * x_stride + c * p.h * p.w,
                                  static_cast<int>(p.h),
                                  static_cast<int>(p.w),
                                  static_cast<int>(tile_row * p.tile) - static_cast<int>(p.pad),
                                  -static_cast<int>(p.pad),
                                  static_cast<int>(p.tile_cols)};
      kernels.input(row, static_cast<int>(run),
                    {s.v + c * tiles + (unit - first) * p.tile_cols, point_stride(p.in, tiles)}, s.scratch);
      unit += run;
    }
}

// Output channels [first, first + count) of y (+)= the convolution of x (+ bias), by their
// transformed weights u: one block of the forward pass of plan p.
void convolve(const Plan& p, std::size_t first_out, std::size_t count, const float* u, const float* x,
              std::size_t x_stride, float* y, std::size_t y_stride, const float* bias, bool accumulate, float* shares) {
  const Transforms kernels = transforms(p.tile);
  parallel_ranges(p.threads, p.units(), [&](int range, std::size_t begin, std::size_t end) {
    const Share s = share_of(p, shares, range);
    for (std::size_t first = begin; first < end; first += p.chunk_rows) {
      const std::size_t last = std::min(end, first + p.chunk_rows), tiles = (last - first) * p.tile_cols;
      transform_inputs(kernels, p, x, x_stride, first, last, s);
      for (std::size_t xi = 0; xi < p.points(); ++xi)
        gemm(count, tiles, p.in, GemmOperand{u + xi * count * p.in, p.in},
             GemmOperand{s.v + xi * point_stride(p.in, tiles), tiles},
             GemmOutput{s.m + xi * point_stride(count, tiles), tiles}, s.packing);
      for (std::size_t k = 0; k < count; ++k)
        for (std::size_t unit = first; unit < last; ++unit) {
          const std::size_t image = unit / p.tile_rows, row0 = unit % p.tile_rows * p.tile, o = first_out + k;
          const winograd::OutputRows rows{y + image * y_stride + (o * p.hout + row0) * p.wout, p.wout,
                                          static_cast<int>(std::min(p.tile, p.hout - row0)), static_cast<int>(p.wout),
                                          accumulate, bias == nullptr ? nullptr : bias + o};
          kernels.output(s.m + k * tiles + (unit - first) * p.tile_cols, point_stride(count, tiles),
                         static_cast<int>(p.tile_cols), rows, s.scratch);
        }
    }
  });
}

// The forward pass of plan p, a block of output channels at a time: filters [out][in][9].
void convolve_blocks(const Plan& p, const float* filters, const float* x, std::size_t x_stride, float* y,
                     std::size_t y_stride, const float* bias, bool accumulate, float* u, float* shares,
                     Packing weights_packing) {
  for (std::size_t first = 0; first < p.out; first += p.block) {
    const std::size_t count = std::min(p.block, p.out - first);
    transform_weights(p, count * p.in, filters + first * p.in * 9, u, weights_packing);
    convolve(p, first, count, u, x, x_stride, y, y_stride, bias, accumulate, shares);
  }
}

// Forward and backward-data: a block's transformed weights, backward-data's turned filters, then
// the threads' shares; before a block's shares are used, its weights' product packs there.
std::size_t turned_floats(const Plan& p) { return aligned_floats(p.out * p.in * 9); }
std::size_t forward_floats(const Plan& p, bool turned) {
  return p.weights_floats() + (turned ? turned_floats(p) : 0) +
         std::max(static_cast<std::size_t>(p.ranges) * share_sizes(p).total(), weights_packing_floats(p));
}
// Backward-filter: the threads' shares, then the packing of the product that turns their sum into dw.
std::size_t filter_floats(const Plan& p) {
  return static_cast<std::size_t>(p.ranges) * share_sizes(p).total() + weights_packing_floats(p);
}

std::atomic<int> winograd_off{0};

// The passes' contract, checked where the backend's dispatch is not in between.
void require_supported(const Conv2dDesc& d, const Shape& x, const char* what) {
  if (!winograd_supports(d, x, false))
    throw std::logic_error(std::string(what) + ": the Winograd passes take no such convolution of " + x.str());
}

}  // namespace

WinogradOff::WinogradOff() { ++winograd_off; }
WinogradOff::~WinogradOff() { --winograd_off; }

bool winograd_supports(const Conv2dDesc& d, const Shape& x, bool products16) {
  return !products16 && std::max(d.groups, 1) == 1 && d.kernel_h == 3 && d.kernel_w == 3 && d.stride == 1 &&
         std::max(d.dilation, 1) == 1 && d.padding >= 0 && d.padding <= 2 && x.rank == 4 && x[0] >= 1 && x[1] >= 1 &&
         d.out_channels >= 1 && x[2] + 2 * d.padding >= 3 && x[3] + 2 * d.padding >= 3;
}

bool winograd_applies(const Conv2dDesc& d, const Shape& x, bool products16, int threads) {
  if (winograd_off.load() != 0 || !winograd_supports(d, x, products16)) return false;
  const auto in = static_cast<std::size_t>(x[1]), out = static_cast<std::size_t>(d.out_channels);
  const int hout = x[2] + 2 * d.padding - 2, wout = x[3] + 2 * d.padding - 2;
  const std::size_t pixels = static_cast<std::size_t>(hout) * static_cast<std::size_t>(wout);
  if (std::min(in, out) < 32 || in * out * pixels < (std::size_t{1} << 18) || std::min(hout, wout) < 8) return false;
  return forward_plan(d, x, threads).fits && filter_plan(d, x, threads).fits &&
         adjoint_plan(d, Shape{x[0], d.out_channels, hout, wout}, threads).fits;
}

std::size_t winograd_workspace_floats(const Conv2dDesc& d, const Shape& x, const Shape& y, ConvPass pass, int threads) {
  if (pass == ConvPass::forward) return forward_floats(forward_plan(d, x, threads), false);
  return std::max(forward_floats(adjoint_plan(d, y, threads), true), filter_floats(filter_plan(d, x, threads)));
}

void winograd_forward(int threads, const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y,
                      bool accumulate, Workspace ws) {
  require_supported(d, x.shape, "conv2d_forward");
  const Plan p = forward_plan(d, x.shape, threads);
  require_workspace_floats(ws, forward_floats(p, false), "conv2d_forward");
  auto* u = static_cast<float*>(ws.data);
  float* shares = u + p.weights_floats();
  convolve_blocks(p, w.data, x.data, x.sample_elements(), y.data, y.sample_elements(), bias.empty() ? nullptr : bias.data,
                  accumulate, u, shares, Packing{shares, weights_packing_floats(p)});
}

// dx = dy convolved with each filter turned half a circle, its channels swapped (Note
// [Backward-data as a convolution], cpu_conv.cpp).
void winograd_backward_data(int threads, const Conv2dDesc& d, const Tensor& dy, const Tensor& w, Tensor dx,
                            bool accumulate, Workspace ws) {
  require_supported(d, dx.shape, "conv2d_backward_data");
  const Plan p = adjoint_plan(d, dy.shape, threads);
  require_workspace_floats(ws, forward_floats(p, true), "conv2d_backward_data");
  auto* u = static_cast<float*>(ws.data);
  float* turned = u + p.weights_floats();  // [out = dx's channels][in = dy's][9]
  float* shares = turned + turned_floats(p);
  for (std::size_t c = 0; c < p.out; ++c)
    for (std::size_t o = 0; o < p.in; ++o) {
      const float* from = w.data + (o * p.out + c) * 9;
      float* to = turned + (c * p.in + o) * 9;
      for (int t = 0; t < 9; ++t) to[t] = from[8 - t];
    }
  convolve_blocks(p, turned, dy.data, dy.sample_elements(), dx.data, dx.sample_elements(), nullptr, accumulate, u,
                  shares, Packing{shares, weights_packing_floats(p)});
}

void winograd_backward_filter(int threads, const Conv2dDesc& d, const Tensor& x, const Tensor& dy, Tensor dw,
                              Tensor dbias, Workspace ws) {
  require_supported(d, x.shape, "conv2d_backward_filter");
  const Plan p = filter_plan(d, x.shape, threads);
  require_workspace_floats(ws, filter_floats(p), "conv2d_backward_filter");
  auto* shares = static_cast<float*>(ws.data);
  const Transforms kernels = transforms(p.tile);
  const std::size_t x_stride = x.sample_elements(), dy_stride = dy.sample_elements();
  const Packing weights_packing{shares + static_cast<std::size_t>(p.ranges) * share_sizes(p).total(),
                                weights_packing_floats(p)};
  for (std::size_t first_out = 0; first_out < p.out; first_out += p.block) {
    const std::size_t count = std::min(p.block, p.out - first_out), sum_floats = p.points() * count * p.in;
    const int used = parallel_ranges(threads, p.units(), [&](int range, std::size_t begin, std::size_t end) {
      const Share s = share_of(p, shares, range);
      std::memset(s.sums, 0, sum_floats * sizeof(float));
      for (std::size_t first = begin; first < end; first += p.chunk_rows) {
        const std::size_t last = std::min(end, first + p.chunk_rows), tiles = (last - first) * p.tile_cols;
        transform_inputs(kernels, p, x.data, x_stride, first, last, s);
        for (std::size_t k = 0; k < count; ++k)
          for (std::size_t unit = first; unit < last; ++unit) {
            const std::size_t image = unit / p.tile_rows, tile_row = unit % p.tile_rows;
            const winograd::TileRow row{dy.data + image * dy_stride + (first_out + k) * p.hout * p.wout,
                                        static_cast<int>(p.hout),
                                        static_cast<int>(p.wout),
                                        static_cast<int>(tile_row * p.tile),
                                        0,
                                        static_cast<int>(p.tile_cols)};
            kernels.gradient(row, {s.m + k * tiles + (unit - first) * p.tile_cols, point_stride(count, tiles)},
                             s.scratch);
          }
        for (std::size_t xi = 0; xi < p.points(); ++xi)
          gemm(count, p.in, tiles, GemmOperand{s.m + xi * point_stride(count, tiles), tiles},
               GemmOperand{s.v + xi * point_stride(p.in, tiles), tiles, true},
               GemmOutput{s.sums + xi * count * p.in, p.in, true},
               s.packing);
      }
    });
    // The shares' sums, added in thread order into the first's.
    float* total = share_of(p, shares, 0).sums;
    parallel_elements(threads, sum_floats, [&](std::size_t begin, std::size_t end) {
      for (int range = 1; range < used; ++range) {
        const float* sums = share_of(p, shares, range).sums;
        for (std::size_t j = begin; j < end; ++j) total[j] += sums[j];
      }
    });
    add_filter_gradient(p, count * p.in, total, dw.data + first_out * p.in * 9, weights_packing);
  }
  if (dbias.empty()) return;
  const std::size_t pixels = p.hout * p.wout;
  parallel_ranges(threads, p.out, [&](int, std::size_t begin, std::size_t end) {
    for (std::size_t o = begin; o < end; ++o) {
      float sum = 0.f;
      for (std::size_t image = 0; image < p.images; ++image) {
        const float* plane = dy.data + image * dy_stride + o * pixels;
        float image_sum = 0.f;
        for (std::size_t i = 0; i < pixels; ++i) image_sum += plane[i];
        sum += image_sum;
      }
      dbias.data[o] += sum;
    }
  });
}

}  // namespace cnn::cpu
