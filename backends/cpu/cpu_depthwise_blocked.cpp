// Depthwise convolution on small planes, 16 channels at a time (backends/cpu/detail/depthwise_conv.hpp
// says when): a block of 16 channels of one image is copied into a zero-padded [H+2p][W+2p][16]
// plane, channels innermost, and every tap is one 16-lane multiply-add per output pixel, its 16
// weights one vector. A 7x7 plane is 49 values: by plane, every loop is shorter than the work of
// setting it up; by block, the loops are over pixels and each step is a full vector whatever the
// plane's size or stride. The outputs are copied back to NCHW, block by block.
//
// Backward-data at stride 1 is the forward loop on dy padded by dilation x (kernel - 1) - padding,
// with the kernel turned around; at other strides each output gradient is scattered to the taps
// that read it, in a padded block. Backward-filter keeps taps + 1 vector sums per block (16
// channels' weight and bias gradients), images and pixels taken in order, each range owning whole
// blocks: the same bits for any thread count.
#include <algorithm>
#include <array>
#include <cstring>

#include <immintrin.h>

#include "backends/cpu/detail/cpu_isa.hpp"
#include "backends/cpu/detail/depthwise_conv.hpp"
#include "backends/cpu/detail/gemm.hpp"
#include "backends/cpu/detail/parallel.hpp"

namespace cnn::cpu {
namespace {

constexpr int kBlock = 16;
constexpr int kMostTaps = 64;

struct Geometry {
  int h, w, hout, wout, kh, kw, stride, pad, dilation;
  int taps() const { return kh * kw; }
  std::size_t in() const { return static_cast<std::size_t>(h) * static_cast<std::size_t>(w); }
  std::size_t out() const { return static_cast<std::size_t>(hout) * static_cast<std::size_t>(wout); }
  int padded_w() const { return w + 2 * pad; }
  std::size_t padded() const { return static_cast<std::size_t>(h + 2 * pad) * static_cast<std::size_t>(padded_w()); }
};

Geometry geometry(const Conv2dDesc& d, const Shape& x) {
  const int dil = std::max(d.dilation, 1);
  const int reach_h = dil * (d.kernel_h - 1) + 1, reach_w = dil * (d.kernel_w - 1) + 1;
  return {x[2],      x[3],      (x[2] + 2 * d.padding - reach_h) / d.stride + 1, (x[3] + 2 * d.padding - reach_w) / d.stride + 1,
          d.kernel_h, d.kernel_w, d.stride, d.padding, dil};
}

// Stride 1's backward-data as a forward pass: dy (hout x wout) padded into dx (h x w).
bool adjoint_of(const Geometry& g, Geometry& adjoint) {
  const int pad_h = g.dilation * (g.kh - 1) - g.pad, pad_w = g.dilation * (g.kw - 1) - g.pad;
  if (g.stride != 1 || pad_h != pad_w || pad_h < 0) return false;
  adjoint = Geometry{g.hout, g.wout, g.h, g.w, g.kh, g.kw, 1, pad_h, g.dilation};
  return true;
}

// Floats of one range's scratch: a padded block and an unpadded one (output, or dy).
std::size_t block_floats(const Geometry& g, ConvPass pass) {
  const std::size_t forward = aligned_floats((g.padded() + g.out()) * kBlock);
  if (pass == ConvPass::forward) return forward;
  Geometry adjoint{};
  const std::size_t data = adjoint_of(g, adjoint) ? aligned_floats((adjoint.padded() + g.in()) * kBlock) : forward;
  return std::max(data, forward);
}

std::size_t block_count(const Shape& x) { return (static_cast<std::size_t>(x[1]) + kBlock - 1) / kBlock; }

// Where flat pixel p of an h x w plane lies in a block of rows of `pw` pixels with `pad` of them
// above and to the left: walked pixel by pixel.
struct Walk {
  int w, pad, pw, r = 0, s = 0;
  std::size_t at() const { return (static_cast<std::size_t>(r + pad) * static_cast<std::size_t>(pw) + static_cast<std::size_t>(s + pad)) * kBlock; }
  void next() {
    if (++s == w) s = 0, ++r;
  }
};

// The kernels' region for the host: 16-float values in one register, two, or four.
CpuIsa region() { return region_for(CpuIsa::avx512); }

}  // namespace
}  // namespace cnn::cpu

#define CNN_ISA_KERNELS "backends/cpu/detail/depthwise_blocked.inl"
#define CNN_ISA_REGION 0
#include "backends/cpu/detail/isa_region.hpp"
#define CNN_ISA_REGION 1
#include "backends/cpu/detail/isa_region.hpp"
#define CNN_ISA_REGION 2
#include "backends/cpu/detail/isa_region.hpp"

namespace cnn::cpu {

// Without AVX-512 the block's transposes are scalar loops, and at stride 1 the per-plane kernels
// win beyond 8 x 8 planes (measured on an AVX2 build: 576x14x14 forward 2.0 ms per plane, 6.4
// blocked; 960x7x7 backward 3.5 per plane, 2.0 blocked; stride 2 on 144x56x56 10.3 blocked, 14.6).
constexpr std::size_t kBlockedMostPixelsStride1WithoutAvx512 = 8 * 8;

bool depthwise_blocked(const Conv2dDesc& d, const Shape& x) {
  const Geometry g = geometry(d, x);
  if (region() < CpuIsa::avx512 && g.stride == 1 && g.in() > kBlockedMostPixelsStride1WithoutAvx512) return false;
  return g.in() <= kBlockedMostPixels && g.taps() <= kMostTaps && g.hout > 0 && g.wout > 0;
}

std::size_t depthwise_blocked_floats(const Conv2dDesc& d, const Shape& x, ConvPass pass, int threads) {
  const Geometry g = geometry(d, x);
  return static_cast<std::size_t>(range_threads(threads, static_cast<std::size_t>(x[0]) * block_count(x))) *
         block_floats(g, pass);
}

namespace {

// One region's passes (depthwise_blocked.inl), for the host's instructions.
struct Passes {
  decltype(&depthwise_blocked_forward) forward;
  decltype(&depthwise_blocked_backward_data) backward_data;
  decltype(&depthwise_blocked_backward_filter) backward_filter;
};

Passes passes() {
  switch (region()) {
#if CNN_ISA_REGIONS
    case CpuIsa::avx512:
      return {isa_avx512::depthwise::forward, isa_avx512::depthwise::backward_data, isa_avx512::depthwise::backward_filter};
    case CpuIsa::avx2:
      return {isa_avx2::depthwise::forward, isa_avx2::depthwise::backward_data, isa_avx2::depthwise::backward_filter};
#endif
    default:
      return {isa_portable::depthwise::forward, isa_portable::depthwise::backward_data,
              isa_portable::depthwise::backward_filter};
  }
}

}  // namespace

void depthwise_blocked_forward(int threads, const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& bias,
                               Tensor y, bool accumulate, Workspace ws) {
  passes().forward(threads, d, x, w, bias, y, accumulate, ws);
}

void depthwise_blocked_backward_data(int threads, const Conv2dDesc& d, const Tensor& dy, const Tensor& w, Tensor dx,
                                     bool accumulate, Workspace ws) {
  passes().backward_data(threads, d, dy, w, dx, accumulate, ws);
}

void depthwise_blocked_backward_filter(int threads, const Conv2dDesc& d, const Tensor& x, const Tensor& dy, Tensor dw,
                                       Tensor dbias, Workspace ws) {
  passes().backward_filter(threads, d, x, dy, dw, dbias, ws);
}

}  // namespace cnn::cpu
