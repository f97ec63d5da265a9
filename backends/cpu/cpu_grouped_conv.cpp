// Grouped convolution on the CPU (backends/cpu/detail/grouped_conv.hpp). im2col + GEMM spent most
// of a grouped 3x3's time writing the column matrix and having Eigen pack it again for a product
// only cout / groups rows tall. Here each (image, group) is copied once into zero-padded planes
// and the product reads its taps straight from them: an output pixel (oh, ow) is computed at
// oh * padded_width + ow ("wide" pixels), so that every tap is the same plane shifted by one
// offset, and the columns past the output's width are computed and dropped. The weights are
// packed once per call in the order the register blocks read them. Backward-data is that forward
// pass over dy with each filter turned around (stride 1). Backward-filter reads the same padded
// planes, several images side by side, against dy laid out wide with zeros in the dropped
// columns; each weight's sum runs in fixed vector lanes over a whole batch of images, then is
// added to dw, batch after batch in image order: the same bits for any thread count.
#include <immintrin.h>

#include <algorithm>
#include <stdexcept>

#include "backends/cpu/detail/cpu_isa.hpp"
#include "backends/cpu/detail/depthwise_conv.hpp"
#include "backends/cpu/detail/gemm.hpp"
#include "backends/cpu/detail/grouped_conv.hpp"
#include "backends/cpu/detail/parallel.hpp"

#define CNN_ISA_KERNELS "backends/cpu/detail/grouped_conv.inl"
#define CNN_ISA_REGION 1
#include "backends/cpu/detail/isa_region.hpp"
#define CNN_ISA_REGION 2
#include "backends/cpu/detail/isa_region.hpp"

namespace cnn::cpu {
namespace {

// The kernels' region for the host; portable has none (im2col + GEMM runs every grouped
// convolution there).
CpuIsa region() { return region_for(CpuIsa::avx512); }

}  // namespace

bool grouped_kernels_apply(const Conv2dDesc& d) {
  const int dil = std::max(d.dilation, 1);
  return region() != CpuIsa::portable && d.groups > 1 && !is_depthwise(d) && d.stride == 1 && d.padding >= 0 &&
         d.padding <= (d.kernel_h - 1) * dil && d.padding <= (d.kernel_w - 1) * dil;
}

namespace {

// One region's kernels (grouped_conv.inl), for the host's instructions: only where
// grouped_kernels_apply.
struct Kernels {
  decltype(&grouped_workspace_floats) workspace_floats;
  decltype(&grouped_forward) forward;
  decltype(&grouped_backward_data) backward_data;
  decltype(&grouped_backward_filter) backward_filter;
};

Kernels kernels() {
  switch (region()) {
#if CNN_ISA_REGIONS
    case CpuIsa::avx512:
      return {isa_avx512::grouped::workspace_floats, isa_avx512::grouped::forward, isa_avx512::grouped::backward_data,
              isa_avx512::grouped::backward_filter};
    case CpuIsa::avx2:
      return {isa_avx2::grouped::workspace_floats, isa_avx2::grouped::forward, isa_avx2::grouped::backward_data,
              isa_avx2::grouped::backward_filter};
#endif
    default: throw std::logic_error("grouped convolution kernels: none for this host or compiler");
  }
}

}  // namespace

std::size_t grouped_workspace_floats(const Conv2dDesc& d, const Shape& x, const Shape& y, ConvPass pass, int threads) {
  return grouped_kernels_apply(d) ? kernels().workspace_floats(d, x, y, pass, threads) : 0;
}

void grouped_forward(int threads, const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y,
                     bool accumulate, Workspace ws) {
  kernels().forward(threads, d, x, w, bias, y, accumulate, ws);
}

void grouped_backward_data(int threads, const Conv2dDesc& d, const Tensor& dy, const Tensor& w, Tensor dx,
                           bool accumulate, Workspace ws) {
  kernels().backward_data(threads, d, dy, w, dx, accumulate, ws);
}

void grouped_backward_filter(int threads, const Conv2dDesc& d, const Tensor& x, const Tensor& dy, Tensor dw,
                             Tensor dbias, Workspace ws) {
  kernels().backward_filter(threads, d, x, dy, dw, dbias, ws);
}

}  // namespace cnn::cpu
