// Convolution as one matrix product per image and group, images spread over threads. In fp32,
// where an image's column matrix would spill out of cache, the products pack it straight from the
// image (Note [Columns packed from the image]) and backward-data at stride 1 is a forward
// convolution of dy (Note [Backward-data as a convolution]); otherwise im2col writes the matrix
// and col2im adds it back. Each product's packing buffers come from the layer's planned workspace
// (backends/cpu/detail/gemm.hpp). A depthwise convolution (groups = in = out channels) has its
// own direct kernels instead (cpu_depthwise_conv.cpp): its products would be one row each; other
// grouped convolutions at stride 1 have implicit products over padded planes
// (cpu_grouped_conv.cpp): a group's products are only out / groups rows tall. The weights, the A
// of every image's product forward and backward-data, are packed once a call at the workspace's
// start (fp32: Note [Operands packed once], gemm.cpp; bf16 and fp16: gemm16's);
// backward-filter's A is the image's gradient.
#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/detail/depthwise_conv.hpp"
#include "backends/cpu/detail/direct_conv.hpp"
#include "backends/cpu/detail/every_micro_batch.hpp"
#include "backends/cpu/detail/gemm.hpp"
#include "backends/cpu/detail/gemm16.hpp"
#include "backends/cpu/detail/grouped_conv.hpp"
#include "backends/cpu/detail/parallel.hpp"
#include "backends/cpu/detail/winograd_conv.hpp"

namespace cnn {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixMap = Eigen::Map<RowMatrix>;
using ConstMatrixMap = Eigen::Map<const RowMatrix>;
using cpu::aligned_floats;
using cpu::GemmOperand;
using cpu::GemmOutput;

constexpr std::size_t round_up_to(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

// One group's convolution: cin and cout are a group's channels (all of them with groups 1).
struct ConvGeometry {
  int cin, h, w, cout, hout, wout, kh, kw, stride, pad, dilation, groups;
  int patch() const { return cin * kh * kw; }          // K: rows of the column matrix
  int pixels() const { return hout * wout; }           // P: its columns
  bool is_pointwise() const { return kh == 1 && kw == 1 && stride == 1 && pad == 0; }
};

ConvGeometry geometry(const Conv2dDesc& d, const Shape& x, const Shape& y) {
  const int groups = std::max(d.groups, 1);
  return {x[1] / groups, x[2], x[3], d.out_channels / groups, y[2], y[3], d.kernel_h, d.kernel_w,
          d.stride, d.padding, std::max(d.dilation, 1), groups};
}

// The output columns [lo, hi) whose input column ow * stride - pad + kj * dilation lies inside
// the image.
struct ColumnRange {
  int lo, hi;
};

ColumnRange valid_columns(const ConvGeometry& g, int kj) {
  const int offset = kj * g.dilation - g.pad;  // iw = ow * stride + offset
  int lo = offset >= 0 ? 0 : (-offset + g.stride - 1) / g.stride;
  int hi = g.w - offset <= 0 ? 0 : (g.w - offset + g.stride - 1) / g.stride;
  hi = std::min(hi, g.wout);
  lo = std::min(lo, hi);
  return {lo, hi};
}

// With stride 1 and as many output columns as input columns (a 3x3 convolution padded by 1), a
// row of the column matrix is the input plane shifted by ki - pad rows and kj - pad columns and
// read flat: col[o] = plane[o + offset] for every o whose input row lies inside the image, except
// in the columns that the shift wraps around a row's end, which are padding. So a row is one
// copy (or one long loop) and a fix-up of those columns, not a short copy per output row: im2col
// and col2im took a quarter of a 3x3 convolution's time on small images (rows of 14).
bool rows_are_flat_shifts(const ConvGeometry& g) { return g.stride == 1 && g.wout == g.w; }

struct FlatShift {
  std::ptrdiff_t first, last;  // the range of o to copy: the inside rows' span, within the plane
  std::ptrdiff_t offset;       // plane index of col element o: o + offset
  int row_lo, row_hi;          // output rows whose input row lies inside the image
  ColumnRange cols;            // valid columns of every such row
};

FlatShift flat_shift(const ConvGeometry& g, int ki, int kj) {
  const int dr = ki * g.dilation - g.pad;  // ih = oh + dr
  const int row_lo = std::clamp(-dr, 0, g.hout), row_hi = std::clamp(g.h - dr, row_lo, g.hout);
  const std::ptrdiff_t offset = static_cast<std::ptrdiff_t>(dr) * g.w + (kj * g.dilation - g.pad);
  const std::ptrdiff_t plane = static_cast<std::ptrdiff_t>(g.h) * g.w;
  // Every valid element's source lies inside the plane; the clamp leaves out wrapped ones only.
  const std::ptrdiff_t begin = static_cast<std::ptrdiff_t>(row_lo) * g.wout,
                      end = static_cast<std::ptrdiff_t>(row_hi) * g.wout;
  const std::ptrdiff_t first = std::clamp(-offset, begin, end);
  const std::ptrdiff_t last = std::clamp(plane - offset, first, end);
  return {first, last, offset, row_lo, row_hi, valid_columns(g, kj)};
}

// Zeroes the columns outside `cols` in output rows [row_lo, row_hi) of one column-matrix row.
void zero_wrapped_columns(const ConvGeometry& g, const FlatShift& s, float* row) {
  for (int oh = s.row_lo; oh < s.row_hi; ++oh) {
    float* r = row + static_cast<std::size_t>(oh) * g.wout;
    for (int ow = 0; ow < s.cols.lo; ++ow) r[ow] = 0.f;
    for (int ow = s.cols.hi; ow < g.wout; ++ow) r[ow] = 0.f;
  }
}

// Row kk of the column matrix (channel kk / (kh kw), tap kk % (kh kw)), its values
// [o0, o0 + count), into `row`: im2col for a stretch of one row, the whole of it in im2col or a
// block's stretch where a product packs the matrix straight from the image (Note [Columns packed
// from the image]).
void column_row(const ConvGeometry& g, const float* image, std::size_t kk, std::size_t o0, std::size_t count, float* row) {
  const std::size_t taps = static_cast<std::size_t>(g.kh) * g.kw;
  const int tap = static_cast<int>(kk % taps), ki = tap / g.kw, kj = tap % g.kw;
  const float* plane = image + kk / taps * static_cast<std::size_t>(g.h) * g.w;
  const ColumnRange cols = valid_columns(g, kj);
  const int offset = kj * g.dilation - g.pad;
  const auto wout = static_cast<std::size_t>(g.wout);
  for (std::size_t o = o0, end = o0 + count; o < end;) {
    const std::size_t oh = o / wout, ow0 = o % wout, ow1 = std::min(wout, ow0 + (end - o));
    float* __restrict out = row + (o - o0) - ow0;  // out[ow] is element (oh, ow)
    o += ow1 - ow0;
    const int ih = static_cast<int>(oh) * g.stride - g.pad + ki * g.dilation;
    // Plain loops, not std::copy and std::fill: stretches of a row's width are too short to pay
    // for a call to memmove or memset.
    if (ih < 0 || ih >= g.h) {
      for (std::size_t ow = ow0; ow < ow1; ++ow) out[ow] = 0.f;
      continue;
    }
    const float* __restrict in = plane + static_cast<std::size_t>(ih) * g.w + offset;
    const std::size_t lo = std::clamp<std::size_t>(static_cast<std::size_t>(cols.lo), ow0, ow1),
                      hi = std::clamp<std::size_t>(static_cast<std::size_t>(cols.hi), lo, ow1);
    for (std::size_t ow = ow0; ow < lo; ++ow) out[ow] = 0.f;
    if (g.stride == 1)
      for (std::size_t ow = lo; ow < hi; ++ow) out[ow] = in[ow];
    else
      for (std::size_t ow = lo; ow < hi; ++ow) out[ow] = in[ow * static_cast<std::size_t>(g.stride)];
    for (std::size_t ow = hi; ow < ow1; ++ow) out[ow] = 0.f;
  }
}

void im2col(const ConvGeometry& g, const float* image, float* col) {
  const int P = g.pixels();
  if (rows_are_flat_shifts(g)) {
    for (int c = 0; c < g.cin; ++c)
      for (int ki = 0; ki < g.kh; ++ki)
        for (int kj = 0; kj < g.kw; ++kj) {
          float* row = col + static_cast<std::size_t>((c * g.kh + ki) * g.kw + kj) * P;
          const float* plane = image + static_cast<std::size_t>(c) * g.h * g.w;
          const FlatShift s = flat_shift(g, ki, kj);
          std::fill(row, row + s.first, 0.f);
          std::copy(plane + s.first + s.offset, plane + s.last + s.offset, row + s.first);
          std::fill(row + s.last, row + P, 0.f);
          zero_wrapped_columns(g, s, row);
        }
    return;
  }
  for (std::size_t kk = 0; kk < static_cast<std::size_t>(g.patch()); ++kk)
    column_row(g, image, kk, 0, static_cast<std::size_t>(P), col + kk * static_cast<std::size_t>(P));
}

// Note [Columns packed from the image]: a product's B panels hold what it multiplies next, so an
// im2col matrix in between is a second copy of the same values: written whole (K x P floats, 7 MiB
// for a 64-channel 3x3 convolution at 56 x 56, past the L2 cache), then read back to be packed.
// Packed from the image instead, a block's values come from an input plane that stays in cache
// (benchmarks/results/cpu_products.md). The forward pass packs col [K x P] by rows of it,
// backward-filter col^T [P x K] by columns, one float at a time (the slow part of that pass).
struct ImageColumns {
  const ConvGeometry* g;
  const float* image;
};

// Values [o0, o0 + count) of a column-matrix row that is the plane shifted by `s`
// (rows_are_flat_shifts) into out[0, count): one stretch of the plane, the zeros of the rows
// outside the image around it, and the wrapped columns zeroed after.
void flat_column_stretch(const ConvGeometry& g, const float* plane, const FlatShift& s, std::ptrdiff_t o0,
                         std::ptrdiff_t count, float* row) {
  float* out = row - o0;  // out[o]
  const std::ptrdiff_t end = o0 + count, lo = std::clamp(s.first, o0, end), hi = std::clamp(s.last, lo, end);
  for (std::ptrdiff_t o = o0; o < lo; ++o) out[o] = 0.f;
  for (std::ptrdiff_t o = lo; o < hi; ++o) out[o] = plane[o + s.offset];
  for (std::ptrdiff_t o = hi; o < end; ++o) out[o] = 0.f;
  if (s.cols.lo == 0 && s.cols.hi == g.wout) return;
  const auto w = static_cast<std::ptrdiff_t>(g.w);
  for (std::ptrdiff_t r = o0 - o0 % w; r < end; r += w) {
    for (std::ptrdiff_t o = std::max(r, o0); o < std::min(r + s.cols.lo, end); ++o) out[o] = 0.f;
    for (std::ptrdiff_t o = std::max(r + s.cols.hi, o0); o < std::min(r + w, end); ++o) out[o] = 0.f;
  }
}

// pack_columns where a column-matrix row is the plane shifted (rows_are_flat_shifts): each panel
// row is one stretch of it (flat_column_stretch).
void pack_flat_columns(const ConvGeometry& g, const float* image, std::size_t k0, std::size_t depth, std::size_t j0,
                       std::size_t cols, float* dst) {
  constexpr auto W = static_cast<std::ptrdiff_t>(cpu::kGemmCols);
  const int taps = g.kh * g.kw;
  for (std::size_t p = 0; p < depth; ++p) {
    const int kk = static_cast<int>(k0 + p), ki = kk % taps / g.kw, kj = kk % g.kw;
    const float* plane = image + static_cast<std::size_t>(kk / taps) * g.h * g.w;
    const FlatShift s = flat_shift(g, ki, kj);
    for (std::ptrdiff_t c = 0; c < static_cast<std::ptrdiff_t>(cols); c += W)
      flat_column_stretch(g, plane, s, static_cast<std::ptrdiff_t>(j0) + c, W,
                          dst + (static_cast<std::size_t>(c) / cpu::kGemmCols * depth + p) * cpu::kGemmCols);
  }
}

// Forward: op(B) = col, k along the taps (kk), n along the pixels.
void pack_columns(const void* context, std::size_t k0, std::size_t depth, std::size_t j0, std::size_t cols, float* dst) {
  const auto& [g, image] = *static_cast<const ImageColumns*>(context);
  constexpr std::size_t W = cpu::kGemmCols;
  if (rows_are_flat_shifts(*g)) return pack_flat_columns(*g, image, k0, depth, j0, cols, dst);
  alignas(64) float row[16 * W];  // a multiple of the panels' width
  for (std::size_t p = 0; p < depth; ++p)
    for (std::size_t c0 = 0; c0 < cols; c0 += std::size(row)) {
      const std::size_t stretch = std::min(std::size(row), cols - c0);
      column_row(*g, image, k0 + p, j0 + c0, stretch, row);
      std::fill(row + stretch, row + round_up_to(stretch, W), 0.f);  // the last panel's columns past n
      for (std::size_t c = 0; c < stretch; c += W) {
        float* panel_row = dst + (c0 + c) / W * depth * W + p * W;
        for (std::size_t j = 0; j < W; ++j) panel_row[j] = row[c + j];  // a fixed count: vector moves, no memmove call
      }
    }
}

// The 16-bit forward pass's B by rows (gemm16's RowsOf16): row k of the column matrix, as
// column_row makes it.
void image_column_row(const void* context, std::size_t k, std::size_t first, std::size_t count, float* out) {
  const auto& [g, image] = *static_cast<const ImageColumns*>(context);
  if (!rows_are_flat_shifts(*g)) return column_row(*g, image, k, first, count, out);
  const int taps = g->kh * g->kw, kk = static_cast<int>(k);
  flat_column_stretch(*g, image + static_cast<std::size_t>(kk / taps) * g->h * g->w,
                      flat_shift(*g, kk % taps / g->kw, kk % g->kw), static_cast<std::ptrdiff_t>(first),
                      static_cast<std::ptrdiff_t>(count), out);
}

// Backward-filter's columns: the column matrices of consecutive images side by side, [K x
// images P], `image_stride` floats from one image to the next (Note [Images side by side]).
struct ImagesColumns {
  const ConvGeometry* g;
  const float* first;
  std::size_t image_stride;
};

// Row kk of ImagesColumns' matrix, its values [o0, o0 + count), across images where they span.
void columns_row(const ImagesColumns& c, std::size_t kk, std::size_t o0, std::size_t count, float* row) {
  const auto P = static_cast<std::size_t>(c.g->pixels());
  for (std::size_t o = o0, end = o0 + count; o < end;) {
    const std::size_t image = o / P, first = o % P, stretch = std::min(end - o, P - first);
    column_row(*c.g, c.first + image * c.image_stride, kk, first, stretch, row + (o - o0));
    o += stretch;
  }
}

// Backward-filter: op(B) = col^T, k along the pixels, n along the taps. Each panel's taps are
// made as rows of pixels (columns_row), then transposed.
void pack_columns_transposed(const void* context, std::size_t k0, std::size_t depth, std::size_t j0, std::size_t cols,
                             float* dst) {
  const auto& columns = *static_cast<const ImagesColumns*>(context);
  constexpr std::size_t W = cpu::kGemmCols;
  alignas(64) float rows[W][cpu::kGemmDepth];  // 36 KiB: a panel's taps
  if (depth > cpu::kGemmDepth) throw std::logic_error("conv2d: a block of " + std::to_string(depth) + " pixels");
  for (std::size_t c0 = 0; c0 < cols; c0 += W) {
    for (std::size_t c = 0; c < W; ++c) {
      if (c0 + c < cols) columns_row(columns, j0 + c0 + c, k0, depth, rows[c]);
      else std::fill(rows[c], rows[c] + depth, 0.f);  // the last panel's columns past n
    }
    cpu::transpose_into_panel(rows[0], cpu::kGemmDepth, depth, dst + c0 / W * depth * W);
  }
}

// Whether an image's column matrix is larger than half the L2 cache (of the 2-core EPYC the results
// come from: 1 MiB). Smaller, im2col writes it in cache, in long copies, and the products pack it
// from there faster than from the image, a short stretch of a row at a time: `small` (14 x 14 and
// 28 x 28 images) trained 0.84x as fast packing every convolution from the image.
bool columns_spill(const ConvGeometry& g) {
  return static_cast<std::size_t>(g.patch()) * static_cast<std::size_t>(g.pixels()) * sizeof(float) > (512u << 10);
}

// Whether the fp32 forward pass (y = w col) or backward-filter (dw += dy col^T) packs its columns
// from the image. Not where its product is narrow (few pixels beside many channels, a late ResNet
// stage's 4 x 4 or 7 x 7): packed panels cannot be swapped into the wide side, stored columns can
// (Note [The narrow side as B], gemm.cpp), and padding a 16-pixel product to the tiles' 48 columns
// trained resnet18 at 32 x 32 0.8x as fast.
bool columns_from_image(const ConvGeometry& g, ConvPass pass, bool products16) {
  if (g.is_pointwise() || !columns_spill(g)) return false;
  if (products16) return pass == ConvPass::forward;  // B by rows (gemm16's RowsOf16) beside packed weights
  const auto C = static_cast<std::size_t>(g.cout);
  return pass == ConvPass::forward ? !cpu::gemm_swaps(C, static_cast<std::size_t>(g.pixels()))
                                   : !cpu::gemm_swaps(C, static_cast<std::size_t>(g.patch()));
}

// Note [Images side by side]: backward-filter adds each image's dw = dy col^T into the thread's
// partial sum, a product whose k is the image's pixels. On small maps that is a read and a write
// of the whole partial dw for a few multiply-adds an element: 49 for a 512-channel 3x3 layer on
// 7 x 7, whose partial dw is 9 MiB, so the pass ran at the memory's speed. Where an image holds
// at most half a block of k (kGemmDepth), the pass multiplies several images' dy and columns
// side by side instead, dw += [dy_1 .. dy_G] [col_1 .. col_G]^T, G images filling one block of k:
// G times fewer passes over dw. Each element then sums G images' products in one chain before
// adding to dw, other bits than one image at a time.
std::size_t images_side_by_side(const ConvGeometry& g, bool products16) {
  const auto P = static_cast<std::size_t>(g.pixels());
  if (products16 || 2 * P > cpu::kGemmDepth) return 1;
  if (!columns_from_image(g, ConvPass::backward, false) && !g.is_pointwise()) return 1;
  if (cpu::gemm_swaps(static_cast<std::size_t>(g.cout), static_cast<std::size_t>(g.patch()))) return 1;
  return cpu::kGemmDepth / P;
}

// Note [Backward-data as a convolution]: at stride 1, dx is dy convolved with the weights turned
// half a circle and their channels swapped, w'[c][o][i][j] = w[o][c][kh-1-i][kw-1-j], padded by
// dilation (k - 1) - pad: a forward pass packed from dy, with no column matrix to write and add
// back (col2im). It takes square kernels whose padding is at most the
// dilated kernel's reach (a "same" or "valid" convolution); the rest keep col2im.
// Like the forward pass's, its product stores its columns where they fit in cache or the product
// is narrow (columns_from_image); the 16-bit products' packed weights never swap, so they take it
// wherever the columns spill.
bool backward_data_as_forward(const ConvGeometry& g, bool products16) {
  return !g.is_pointwise() && columns_spill(g) && g.stride == 1 && g.kh == g.kw && g.pad <= g.dilation * (g.kh - 1) &&
         (products16 || !cpu::gemm_swaps(static_cast<std::size_t>(g.cin), static_cast<std::size_t>(g.h) * g.w));
}

// The forward convolution that backward-data becomes: dy's channels in, dx's out.
ConvGeometry adjoint(const ConvGeometry& g) {
  return {g.cout, g.hout, g.wout, g.cin, g.h, g.w, g.kh, g.kw, 1, g.dilation * (g.kh - 1) - g.pad, g.dilation, g.groups};
}

// w' of every group, [groups][cin][cout x taps].
void flip_weights(const ConvGeometry& g, const float* w, float* flipped) {
  const std::size_t taps = static_cast<std::size_t>(g.kh) * g.kw, cin = static_cast<std::size_t>(g.cin),
                    cout = static_cast<std::size_t>(g.cout);
  for (std::size_t group = 0; group < static_cast<std::size_t>(g.groups); ++group)
    for (std::size_t c = 0; c < cin; ++c)
      for (std::size_t o = 0; o < cout; ++o) {
        const float* from = w + ((group * cout + o) * cin + c) * taps;
        float* to = flipped + ((group * cin + c) * cout + o) * taps;
        for (std::size_t t = 0; t < taps; ++t) to[t] = from[taps - 1 - t];
      }
}

// Adds the column matrix back into the image. `col` is scratch: the flat path zeroes the wrapped
// columns in it and adds each row as one long loop. A wrapped element then adds +0.0f to an
// image element that also receives its own (centre tap) term, never -0.0f (the products start
// from +0.0f), so the sums are the same bits as adding the valid elements alone.
void col2im_add(const ConvGeometry& g, float* col, float* image) {
  const int P = g.pixels();
  if (rows_are_flat_shifts(g)) {
    for (int c = 0; c < g.cin; ++c)
      for (int ki = 0; ki < g.kh; ++ki)
        for (int kj = 0; kj < g.kw; ++kj) {
          float* row = col + static_cast<std::size_t>((c * g.kh + ki) * g.kw + kj) * P;
          float* plane = image + static_cast<std::size_t>(c) * g.h * g.w;
          const FlatShift s = flat_shift(g, ki, kj);
          zero_wrapped_columns(g, s, row);
          float* out = plane + s.offset;
          for (std::ptrdiff_t o = s.first; o < s.last; ++o) out[o] += row[o];
        }
    return;
  }
  for (int c = 0; c < g.cin; ++c)
    for (int ki = 0; ki < g.kh; ++ki)
      for (int kj = 0; kj < g.kw; ++kj) {
        const float* row = col + static_cast<std::size_t>((c * g.kh + ki) * g.kw + kj) * P;
        float* plane = image + static_cast<std::size_t>(c) * g.h * g.w;
        const ColumnRange cols = valid_columns(g, kj);
        const int offset = kj * g.dilation - g.pad;
        for (int oh = 0; oh < g.hout; ++oh) {
          const int ih = oh * g.stride - g.pad + ki * g.dilation;
          if (ih < 0 || ih >= g.h) continue;
          float* out = plane + static_cast<std::size_t>(ih) * g.w + offset;
          const float* in = row + oh * g.wout;
          if (g.stride == 1)
            for (int ow = cols.lo; ow < cols.hi; ++ow) out[ow] += in[ow];
          else
            for (int ow = cols.lo; ow < cols.hi; ++ow) out[ow * g.stride] += in[ow];
        }
      }
}

// One thread's share of a convolution's workspace, in floats (each part 64-byte aligned): the
// column matrix, the partial weight and bias gradients (backward), the products' packing, and
// (backward-filter, Note [Images side by side]) dy of several images side by side.
struct ConvThreadSpace {
  std::size_t col = 0, partial = 0, packing = 0, side_by_side = 0;
  std::size_t total() const { return col + partial + packing + side_by_side; }
};

// The sizes of an fp32 pass's products with the weights as A: forward y[C x P] = w col[K x P];
// backward-data dx = w' dy's columns (Note [Backward-data as a convolution]), else
// dcol[K x P] = w^T dy. `b_from_panels`: B packed from the image (GemmPanels).
struct WeightProduct {
  std::size_t m, n, k;
  bool b_from_panels;
  std::size_t shared_floats() const { return cpu::shared_a_floats(m, n, k, b_from_panels); }
  std::size_t packing_floats() const { return cpu::gemm_shared_a_packing_floats(m, n, k, b_from_panels); }
  cpu::SharedA shared(const float* packed) const { return cpu::SharedA(packed, m, n, k, b_from_panels); }
};

WeightProduct forward_product(const ConvGeometry& g) {
  return {static_cast<std::size_t>(g.cout), static_cast<std::size_t>(g.pixels()), static_cast<std::size_t>(g.patch()),
          columns_from_image(g, ConvPass::forward, false)};
}

WeightProduct backward_data_product(const ConvGeometry& g) {
  if (!backward_data_as_forward(g, false))
    return {static_cast<std::size_t>(g.patch()), static_cast<std::size_t>(g.pixels()), static_cast<std::size_t>(g.cout),
            false};
  const ConvGeometry a = adjoint(g);
  return {static_cast<std::size_t>(a.cout), static_cast<std::size_t>(a.pixels()), static_cast<std::size_t>(a.patch()),
          true};
}

ConvThreadSpace thread_space(const ConvGeometry& g, ConvPass pass, bool products16) {
  const std::size_t K = static_cast<std::size_t>(g.patch()), P = static_cast<std::size_t>(g.pixels()),
                    C = static_cast<std::size_t>(g.cout);
  ConvThreadSpace s;
  const bool from_image = columns_from_image(g, pass, products16);
  // The column matrix in memory, unless every product of the pass packs from the image.
  const bool columns_written =
      !from_image || (pass == ConvPass::backward && !backward_data_as_forward(g, products16));
  s.col = !g.is_pointwise() && columns_written ? aligned_floats(K * P) : 0;
  if (pass == ConvPass::forward) {
    // y[C x P] = w[C x K] col[K x P], per group
    s.packing = products16 ? cpu::gemm16_packing_floats(C, P, K, true, false) : forward_product(g).packing_floats();
  } else {
    s.partial = aligned_floats(C * static_cast<std::size_t>(g.groups) * (K + 1));  // every group's dw, dbias
    const std::size_t images = images_side_by_side(g, products16);
    if (images > 1) s.side_by_side = aligned_floats(C * images * P);
    const ConvGeometry a = adjoint(g);
    s.packing = products16 ? std::max({cpu::gemm16_packing_floats(K, P, C, true, false),
                                       cpu::gemm16_packing_floats(C, K, P, false, false),
                                       cpu::gemm16_packing_floats(static_cast<std::size_t>(a.cout), a.pixels(),
                                                                  static_cast<std::size_t>(a.patch()), true, false)})
                           : std::max(backward_data_product(g).packing_floats(),
                                      images > 1   ? cpu::gemm_panels_packing_floats(C, K, images * P)
                                      : from_image ? cpu::gemm_panels_packing_floats(C, K, P)
                                                   : cpu::gemm_packing_floats(C, K, P));  // dw[C x K] += dy col^T
  }
  return s;
}

// 16-bit products: every group's weights packed whole, once a call, before the threads' shares:
// w [C x K] forward, w^T [K x C] backward (the backward-data product's; backward-filter leaves it
// unused), or the turned weights where backward-data runs as a forward convolution.
std::size_t packed_weights_words(const ConvGeometry& g, ConvPass pass) {
  const std::size_t K = static_cast<std::size_t>(g.patch()), C = static_cast<std::size_t>(g.cout);
  if (pass == ConvPass::backward && backward_data_as_forward(g, true)) {  // the turned weights, [cin x cout taps]
    const ConvGeometry a = adjoint(g);
    return cpu::packed16_a_words(static_cast<std::size_t>(a.cout), static_cast<std::size_t>(a.patch()));
  }
  return pass == ConvPass::forward ? cpu::packed16_a_words(C, K) : cpu::packed16_a_words(K, C);
}
// fp32 backward-data's turned weights (flip_weights), where it runs as a forward convolution.
std::size_t flipped_floats(const ConvGeometry& g, ConvPass pass, bool products16) {
  return pass == ConvPass::backward && backward_data_as_forward(g, products16)
             ? aligned_floats(static_cast<std::size_t>(g.groups) * g.cin * g.cout * g.kh * g.kw)
             : 0;
}

// What a call's threads share at the workspace's start: the 16-bit products' packed weights, or
// fp32's turned weights and every group's weights packed (pack_fp32_weights).
std::size_t shared_floats(const ConvGeometry& g, ConvPass pass, bool products16) {
  if (products16)
    return flipped_floats(g, pass, true) +
           aligned_floats(packed_weights_words(g, pass) * static_cast<std::size_t>(g.groups));
  const WeightProduct product = pass == ConvPass::forward ? forward_product(g) : backward_data_product(g);
  return flipped_floats(g, pass, products16) + static_cast<std::size_t>(g.groups) * product.shared_floats();
}

// Packs each group's weights, op(w) of `product`, at `packed`, product.shared_floats() apart.
void pack_fp32_weights(int threads, const ConvGeometry& g, const WeightProduct& product, GemmOperand w,
                       std::size_t group_floats, float* packed) {
  for (std::size_t group = 0; group < static_cast<std::size_t>(g.groups); ++group) {
    GemmOperand weights = w;
    weights.data += group * group_floats;
    cpu::pack_shared_a(threads, product.m, product.n, product.k, product.b_from_panels, weights,
                       packed + group * product.shared_floats());
  }
}

// Packs each group's weights (op(w) of the pass) at `packed`.
void pack_weights(ValueFormat format, int threads, const ConvGeometry& g, ConvPass pass, const float* w,
                  std::uint32_t* packed) {
  const std::size_t K = static_cast<std::size_t>(g.patch()), C = static_cast<std::size_t>(g.cout);
  for (int gi = 0; gi < g.groups; ++gi) {
    const auto group = static_cast<std::size_t>(gi);
    std::uint32_t* out = packed + group * packed_weights_words(g, pass);
    if (pass == ConvPass::forward)
      cpu::pack16_a(format, threads, C, K, GemmOperand{w + group * C * K, K}, out);
    else
      cpu::pack16_a(format, threads, K, C, GemmOperand{w + group * C * K, K, true}, out);
  }
}

void require_workspace(const Workspace& ws, std::size_t needed, const char* what) {
  if (ws.bytes < needed)
    throw std::logic_error(std::string(what) + ": workspace of " + std::to_string(ws.bytes) +
                           " bytes, " + std::to_string(needed) + " needed");
}

}  // namespace

std::size_t CpuBackend::do_conv2d_workspace_bytes(const Conv2dDesc& d, const Shape& x, const Shape& y,
                                                  ConvPass pass, std::size_t) {
  return cpu::most_over_micro_batches(
      x[0], [&](int n) { return conv2d_workspace_at(d, cpu::at_batch(x, n), cpu::at_batch(y, n), pass); });
}

std::size_t CpuBackend::conv2d_workspace_at(const Conv2dDesc& d, const Shape& x, const Shape& y, ConvPass pass) const {
  if (cpu::is_depthwise(d)) return cpu::depthwise_workspace_floats(d, x, pass, threads_) * sizeof(float);
  if (cpu::grouped_kernels_apply(d)) return cpu::grouped_workspace_floats(d, x, y, pass, threads_) * sizeof(float);
  // The direct kernels' share of the pass: both backward calls share the backward size, and where
  // one of them is not direct, the other paths' size is the least the pass needs.
  std::size_t direct_floats = 0;
  bool all_direct = true;
  const auto count = [&](cpu::DirectPass call) {
    if (!cpu::direct_applies(d, x, products16(), call)) {
      all_direct = false;
      return;
    }
    direct_floats = std::max(direct_floats, cpu::direct_workspace_floats(d, x, y, call, threads_));
  };
  if (pass == ConvPass::forward) {
    count(cpu::DirectPass::forward);
  } else {
    count(cpu::DirectPass::backward_data);
    count(cpu::DirectPass::backward_filter);
  }
  if (all_direct) return direct_floats * sizeof(float);
  if (cpu::winograd_applies(d, x, products16(), threads_))
    return std::max(direct_floats, cpu::winograd_workspace_floats(d, x, y, pass, threads_)) * sizeof(float);
  // One share per thread that parallel_ranges runs over the images.
  const auto workers = static_cast<std::size_t>(cpu::range_threads(threads_, static_cast<std::size_t>(std::max(x[0], 1))));
  const ConvGeometry g = geometry(d, x, y);
  return std::max(direct_floats,
                  shared_floats(g, pass, products16()) + workers * thread_space(g, pass, products16()).total()) *
         sizeof(float);
}

void CpuBackend::do_conv2d_forward(const Conv2dDesc& d, const Tensor& x, const Tensor& w,
                                   const Tensor& bias, Tensor y, bool accumulate, Workspace ws) {
  conv_forward(d, x, w, bias, y, accumulate, false, ws);
}

void CpuBackend::do_conv2d_relu_forward(const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& bias,
                                        Tensor y, Workspace ws) {
  conv_forward(d, x, w, bias, y, false, true, ws);
}

void CpuBackend::conv_forward(const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y,
                              bool accumulate, bool relu, Workspace ws) {
  if (relu && accumulate) throw std::logic_error("conv_forward: a ReLU over an output it adds to");
  // The paths with no pass of their own for the ReLU: the convolution, then relu_forward's pass.
  auto then_relu = [&] {
    if (relu) do_relu_forward(y, y);
  };
  if (cpu::is_depthwise(d)) {
    cpu::depthwise_forward(threads_, d, x, w, bias, y, accumulate, ws);
    return then_relu();
  }
  if (cpu::grouped_kernels_apply(d)) {
    require_workspace(ws, conv2d_workspace_at(d, x.shape, y.shape, ConvPass::forward), "conv2d_forward");
    cpu::grouped_forward(threads_, d, x, w, bias, y, accumulate, ws);
    return then_relu();
  }
  if (cpu::direct_applies(d, x.shape, products16(), cpu::DirectPass::forward))
    return cpu::direct_forward(threads_, d, x, w, bias, y, accumulate, ws, relu);
  if (cpu::winograd_applies(d, x.shape, products16(), threads_)) {
    cpu::winograd_forward(threads_, d, x, w, bias, y, accumulate, ws);
    return then_relu();
  }
  const ConvGeometry g = geometry(d, x.shape, y.shape);
  const std::size_t K = static_cast<std::size_t>(g.patch()), P = static_cast<std::size_t>(g.pixels()),
                    C = static_cast<std::size_t>(g.cout);
  require_workspace(ws, conv2d_workspace_at(d, x.shape, y.shape, ConvPass::forward), "conv2d_forward");
  const ConvThreadSpace space = thread_space(g, ConvPass::forward, products16());
  const bool from_image = columns_from_image(g, ConvPass::forward, products16());
  const std::size_t in_stride = x.sample_elements(), out_stride = y.sample_elements();
  const std::size_t group_in = static_cast<std::size_t>(g.cin) * g.h * g.w;  // a group's input floats
  auto* packed = static_cast<std::uint32_t*>(ws.data);
  const WeightProduct product = forward_product(g);
  auto* packed_fp32 = static_cast<float*>(ws.data);
  if (products16()) pack_weights(product_format(), threads_, g, ConvPass::forward, w.data, packed);
  else pack_fp32_weights(threads_, g, product, GemmOperand{w.data, K}, C * K, packed_fp32);
  float* shares = static_cast<float*>(ws.data) + shared_floats(g, ConvPass::forward, products16());
  cpu::parallel_ranges(threads_, static_cast<std::size_t>(x.n()), [&](int t, std::size_t b, std::size_t e) {
    float* col = shares + static_cast<std::size_t>(t) * space.total();
    const cpu::Packing packing{col + space.col, space.packing};
    for (std::size_t i = b; i < e; ++i) {
      for (int gi = 0; gi < g.groups; ++gi) {
        const auto group = static_cast<std::size_t>(gi);
        const float* image = x.data + i * in_stride + group * group_in;
        float* out = y.data + i * out_stride + group * C * P;
        const cpu::SharedA weights = product.shared(packed_fp32 + group * product.shared_floats());
        const ImageColumns columns{&g, image};
        if (from_image && products16()) {
          const cpu::Operand16 packed_weights{{}, packed + group * packed_weights_words(g, ConvPass::forward), C, 0};
          cpu::gemm16(product_format(), C, P, K, packed_weights, cpu::RowsOf16{image_column_row, &columns},
                      GemmOutput{out, P, accumulate}, packing);
          continue;
        }
        if (from_image) {
          cpu::gemm(C, P, K, weights, cpu::GemmPanels{pack_columns, &columns}, GemmOutput{out, P, accumulate}, packing);
          continue;
        }
        if (!g.is_pointwise()) im2col(g, image, col);
        if (!products16()) {
          cpu::gemm(C, P, K, weights, GemmOperand{g.is_pointwise() ? image : col, P}, GemmOutput{out, P, accumulate},
                    packing);
          continue;
        }
        cpu::gemm16(product_format(), C, P, K, {{}, packed + group * packed_weights_words(g, ConvPass::forward), C, 0},
                    {GemmOperand{g.is_pointwise() ? image : col, P}}, GemmOutput{out, P, accumulate}, packing);
      }
      if (!bias.empty())
        MatrixMap(y.data + i * out_stride, d.out_channels, static_cast<Eigen::Index>(P)).colwise() +=
            Eigen::Map<const Eigen::VectorXf>(bias.data, d.out_channels);
      if (relu) {  // relu_forward's select, while the image's output is in cache
        float* out = y.data + i * out_stride;
        for (std::size_t k = 0; k < out_stride; ++k) out[k] = out[k] > 0.f ? out[k] : 0.f;
      }
    }
  });
}

void CpuBackend::do_conv2d_backward_data(const Conv2dDesc& d, const Tensor& dy, const Tensor& w, Tensor dx,
                                         bool accumulate, Workspace ws) {
  if (cpu::is_depthwise(d)) return cpu::depthwise_backward_data(threads_, d, dy, w, dx, accumulate, ws);
  if (cpu::grouped_kernels_apply(d)) {
    require_workspace(ws, conv2d_workspace_at(d, dx.shape, dy.shape, ConvPass::backward), "conv2d_backward_data");
    return cpu::grouped_backward_data(threads_, d, dy, w, dx, accumulate, ws);
  }
  if (cpu::direct_applies(d, dx.shape, products16(), cpu::DirectPass::backward_data))
    return cpu::direct_backward_data(threads_, d, dy, w, dx, accumulate, ws);
  if (cpu::winograd_applies(d, dx.shape, products16(), threads_)) return cpu::winograd_backward_data(threads_, d, dy, w, dx, accumulate, ws);
  const ConvGeometry g = geometry(d, dx.shape, dy.shape);
  const std::size_t K = static_cast<std::size_t>(g.patch()), P = static_cast<std::size_t>(g.pixels()),
                    C = static_cast<std::size_t>(g.cout);
  require_workspace(ws, conv2d_workspace_at(d, dx.shape, dy.shape, ConvPass::backward), "conv2d_backward_data");
  const ConvThreadSpace space = thread_space(g, ConvPass::backward, products16());
  const std::size_t in_stride = dx.sample_elements(), out_stride = dy.sample_elements();
  const std::size_t group_in = static_cast<std::size_t>(g.cin) * g.h * g.w;
  if (backward_data_as_forward(g, products16())) {
    auto* flipped = static_cast<float*>(ws.data);
    flip_weights(g, w.data, flipped);
    const ConvGeometry a = adjoint(g);
    const std::size_t a_K = static_cast<std::size_t>(a.patch()), a_P = static_cast<std::size_t>(a.pixels()),
                      a_C = static_cast<std::size_t>(a.cout);
    const WeightProduct product = backward_data_product(g);  // fp32's
    float* packed = flipped + flipped_floats(g, ConvPass::backward, products16());
    auto* packed16 = reinterpret_cast<std::uint32_t*>(packed);
    const std::size_t group_words = products16() ? packed_weights_words(g, ConvPass::backward) : 0;
    if (products16())
      for (std::size_t group = 0; group < static_cast<std::size_t>(g.groups); ++group)
        cpu::pack16_a(product_format(), threads_, a_C, a_K, GemmOperand{flipped + group * a_C * a_K, a_K},
                      packed16 + group * group_words);
    else
      pack_fp32_weights(threads_, g, product, GemmOperand{flipped, a_K}, a_C * a_K, packed);
    float* shares = flipped + shared_floats(g, ConvPass::backward, products16());
    cpu::parallel_ranges(threads_, static_cast<std::size_t>(dx.n()), [&](int t, std::size_t b, std::size_t e) {
      const cpu::Packing packing{shares + static_cast<std::size_t>(t) * space.total() + space.col + space.partial,
                                 space.packing};
      for (std::size_t i = b; i < e; ++i)
        for (std::size_t group = 0; group < static_cast<std::size_t>(g.groups); ++group) {
          const ImageColumns columns{&a, dy.data + i * out_stride + group * C * P};
          const GemmOutput image{dx.data + i * in_stride + group * group_in, a_P, accumulate};
          if (products16())
            cpu::gemm16(product_format(), a_C, a_P, a_K, {{}, packed16 + group * group_words, a_C, 0},
                        cpu::RowsOf16{image_column_row, &columns}, image, packing);
          else
            cpu::gemm(a_C, a_P, a_K, product.shared(packed + group * product.shared_floats()),
                      cpu::GemmPanels{pack_columns, &columns}, image, packing);
        }
    });
    return;
  }
  auto* packed = static_cast<std::uint32_t*>(ws.data);
  const WeightProduct product = backward_data_product(g);
  auto* packed_fp32 = static_cast<float*>(ws.data);
  if (products16()) pack_weights(product_format(), threads_, g, ConvPass::backward, w.data, packed);
  else pack_fp32_weights(threads_, g, product, GemmOperand{w.data, K, true}, C * K, packed_fp32);  // w^T: w is [C x K]
  float* shares = static_cast<float*>(ws.data) + shared_floats(g, ConvPass::backward, products16());
  cpu::parallel_ranges(threads_, static_cast<std::size_t>(dx.n()), [&](int t, std::size_t b, std::size_t e) {
    float* col = shares + static_cast<std::size_t>(t) * space.total();
    const cpu::Packing packing{col + space.col + space.partial, space.packing};
    for (std::size_t i = b; i < e; ++i) {
      if (!accumulate && !g.is_pointwise()) std::memset(dx.data + i * in_stride, 0, in_stride * sizeof(float));
      for (int gi = 0; gi < g.groups; ++gi) {
        const auto group = static_cast<std::size_t>(gi);
        const GemmOperand grad_out{dy.data + i * out_stride + group * C * P, P};
        float* image = dx.data + i * in_stride + group * group_in;
        const GemmOutput result = g.is_pointwise() ? GemmOutput{image, P, accumulate} : GemmOutput{col, P};
        if (products16())
          cpu::gemm16(product_format(), K, P, C,
                      {{}, packed + group * packed_weights_words(g, ConvPass::backward), K, 0}, {grad_out}, result,
                      packing);
        else
          cpu::gemm(K, P, C, product.shared(packed_fp32 + group * product.shared_floats()), grad_out, result, packing);
        if (!g.is_pointwise()) col2im_add(g, col, image);
      }
    }
  });
}

void CpuBackend::do_conv2d_backward_filter(const Conv2dDesc& d, const Tensor& x, const Tensor& dy, Tensor dw,
                                           Tensor dbias, Workspace ws) {
  if (cpu::is_depthwise(d)) return cpu::depthwise_backward_filter(threads_, d, x, dy, dw, dbias, ws);
  if (cpu::grouped_kernels_apply(d)) {
    require_workspace(ws, conv2d_workspace_at(d, x.shape, dy.shape, ConvPass::backward), "conv2d_backward_filter");
    return cpu::grouped_backward_filter(threads_, d, x, dy, dw, dbias, ws);
  }
  if (cpu::direct_applies(d, x.shape, products16(), cpu::DirectPass::backward_filter))
    return cpu::direct_backward_filter(threads_, d, x, dy, dw, dbias, ws);
  if (cpu::winograd_applies(d, x.shape, products16(), threads_)) return cpu::winograd_backward_filter(threads_, d, x, dy, dw, dbias, ws);
  const ConvGeometry g = geometry(d, x.shape, dy.shape);
  const std::size_t K = static_cast<std::size_t>(g.patch()), P = static_cast<std::size_t>(g.pixels()),
                    C = static_cast<std::size_t>(g.cout);
  const std::size_t all_out = C * static_cast<std::size_t>(g.groups);
  require_workspace(ws, conv2d_workspace_at(d, x.shape, dy.shape, ConvPass::backward), "conv2d_backward_filter");
  const ConvThreadSpace space = thread_space(g, ConvPass::backward, products16());
  const bool from_image = columns_from_image(g, ConvPass::backward, products16());
  const std::size_t images = images_side_by_side(g, products16());
  const std::size_t grad_floats = all_out * K + all_out;
  const std::size_t in_stride = x.sample_elements(), out_stride = dy.sample_elements();
  const std::size_t group_in = static_cast<std::size_t>(g.cin) * g.h * g.w;
  float* base = static_cast<float*>(ws.data) + shared_floats(g, ConvPass::backward, products16());
  const int used = cpu::parallel_ranges(threads_, static_cast<std::size_t>(x.n()), [&](int t, std::size_t b, std::size_t e) {
    float* col = base + static_cast<std::size_t>(t) * space.total();
    float* partial = col + space.col;
    const cpu::Packing packing{partial + space.partial, space.packing};
    float* side_by_side = packing.data + space.packing;
    std::memset(partial, 0, grad_floats * sizeof(float));
    Eigen::Map<Eigen::VectorXf> partial_b(partial + all_out * K, static_cast<Eigen::Index>(all_out));
    for (std::size_t i = b; i < e; i += images) {
      const std::size_t count = std::min(images, e - i);
      for (int gi = 0; images > 1 && gi < g.groups; ++gi) {
        const auto group = static_cast<std::size_t>(gi);
        for (std::size_t o = 0; o < C; ++o)
          for (std::size_t j = 0; j < count; ++j)
            std::memcpy(side_by_side + (o * count + j) * P, dy.data + (i + j) * out_stride + (group * C + o) * P,
                        P * sizeof(float));
        const ImagesColumns columns{&g, x.data + i * in_stride + group * group_in, in_stride};
        cpu::gemm(C, K, count * P, GemmOperand{side_by_side, count * P}, cpu::GemmPanels{pack_columns_transposed, &columns},
                  GemmOutput{partial + group * C * K, K, true}, packing);
      }
      for (int gi = 0; images == 1 && gi < g.groups; ++gi) {
        const auto group = static_cast<std::size_t>(gi);
        const float* image = x.data + i * in_stride + group * group_in;
        const GemmOperand grad_out{dy.data + i * out_stride + group * C * P, P};
        const GemmOutput result{partial + group * C * K, K, true};
        if (from_image) {
          const ImagesColumns columns{&g, image, in_stride};
          cpu::gemm(C, K, P, grad_out, cpu::GemmPanels{pack_columns_transposed, &columns}, result, packing);
          continue;
        }
        if (!g.is_pointwise()) im2col(g, image, col);
        const GemmOperand columns_transposed{g.is_pointwise() ? image : col, P, true};  // col^T: col is [K x P]
        if (products16()) cpu::gemm16(product_format(), C, K, P, {grad_out}, {columns_transposed}, result, packing);
        else cpu::gemm(C, K, P, grad_out, columns_transposed, result, packing);
      }
      for (std::size_t j = i; j < i + count; ++j)
        partial_b += ConstMatrixMap(dy.data + j * out_stride, static_cast<Eigen::Index>(all_out), static_cast<Eigen::Index>(P))
                         .rowwise()
                         .sum();
    }
  });
  // Fixed-order reduction of the per-thread partials.
  const std::size_t weight_floats = all_out * K;
  cpu::parallel_elements(threads_, grad_floats, [&](std::size_t b, std::size_t e) {
    for (std::size_t j = b; j < e; ++j) {
      float sum = 0.f;
      for (int t = 0; t < used; ++t) sum += base[static_cast<std::size_t>(t) * space.total() + space.col + j];
      if (j < weight_floats) dw.data[j] += sum;
      else if (!dbias.empty()) dbias.data[j - weight_floats] += sum;
    }
  });
}

}  // namespace cnn
