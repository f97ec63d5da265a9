// Upsampling by a whole factor F, PyTorch's nn.Upsample: nearest, and bilinear with
// align_corners=False, each source position and weight computed as PyTorch computes them (and as
// the CPU backend does). Forward: one thread per output. Backward gathers: one thread per input
// sums the outputs it fed in a fixed order, so no atomics and the same bits every run.
#include <cstddef>
#include <string>

#include "backends/cuda/detail/check.hpp"
#include "backends/cuda/detail/cuda_backend_impl.hpp"
#include "backends/cuda/detail/grid_stride.cuh"
#include <cnnengine/base/error.hpp>

namespace cnn::cuda {
namespace {

struct Geometry {
  int h, w, factor;
  float scale;  // 1 / factor, as PyTorch takes it
};

struct Taps {
  int i0, i1;
  float l1;  // weights 1 - l1 for i0, l1 for i1
};

__device__ Taps taps(int o, int length, float scale) {
  const float src = fmaxf(scale * (static_cast<float>(o) + 0.5f) - 0.5f, 0.0f);
  const int i0 = static_cast<int>(src);
  return {i0, i0 + (i0 < length - 1 ? 1 : 0), src - static_cast<float>(i0)};
}

__device__ float weight(int o, int i, int length, float scale) {
  const Taps t = taps(o, length, scale);
  return (t.i0 == i ? 1.0f - t.l1 : 0.0f) + (t.i1 == i ? t.l1 : 0.0f);
}

template <bool Bilinear>
__global__ void upsample_forward_kernel(const float* x, float* y, Geometry g, std::size_t total) {
  const int out_h = g.h * g.factor, out_w = g.w * g.factor;
  CNN_FOR_EACH_ELEMENT(i, total) {
    const int ow = static_cast<int>(i % out_w);
    const int oh = static_cast<int>(i / out_w % out_h);
    const float* plane = x + i / (static_cast<std::size_t>(out_h) * out_w) * g.h * g.w;
    if (!Bilinear) {
      y[i] = plane[(oh / g.factor) * g.w + ow / g.factor];
      continue;
    }
    // Blended down the column first, then across: the CPU backend's order.
    const Taps v = taps(oh, g.h, g.scale), u = taps(ow, g.w, g.scale);
    const float* r0 = plane + static_cast<std::size_t>(v.i0) * g.w;
    const float* r1 = plane + static_cast<std::size_t>(v.i1) * g.w;
    const float v0 = 1.0f - v.l1, v1 = v.l1;
    const float t0 = v0 * r0[u.i0] + v1 * r1[u.i0];
    const float t1 = v0 * r0[u.i1] + v1 * r1[u.i1];
    y[i] = (1.0f - u.l1) * t0 + u.l1 * t1;
  }
}

template <bool Bilinear, bool Accumulate>
__global__ void upsample_backward_kernel(const float* dy, float* dx, Geometry g, std::size_t total) {
  const int f = g.factor, out_h = g.h * f, out_w = g.w * f;
  CNN_FOR_EACH_ELEMENT(i, total) {
    const int iw = static_cast<int>(i % g.w);
    const int ih = static_cast<int>(i / g.w % g.h);
    const float* plane = dy + i / (static_cast<std::size_t>(g.h) * g.w) * out_h * out_w;
    float sum = 0.0f;
    if (!Bilinear) {
      for (int r = 0; r < f; ++r) {
        const float* row = plane + static_cast<std::size_t>(ih * f + r) * out_w + iw * f;
        for (int k = 0; k < f; ++k) sum += row[k];
      }
    } else {
      // The outputs whose taps may reach (ih, iw): rows [(ih - 1) F, (ih + 2) F), columns likewise.
      const int oh0 = max(0, (ih - 1) * f), oh1 = min(out_h, (ih + 2) * f);
      const int ow0 = max(0, (iw - 1) * f), ow1 = min(out_w, (iw + 2) * f);
      for (int oh = oh0; oh < oh1; ++oh) {
        const float wv = weight(oh, ih, g.h, g.scale);
        if (wv == 0.0f) continue;
        const float* row = plane + static_cast<std::size_t>(oh) * out_w;
        float across = 0.0f;
        for (int ow = ow0; ow < ow1; ++ow) across += weight(ow, iw, g.w, g.scale) * row[ow];
        sum += wv * across;
      }
    }
    dx[i] = Accumulate ? dx[i] + sum : sum;
  }
}

// x and its upsampling, as the front checked them.
Geometry geometry(const UpsampleDesc& d, const Tensor& x) {
  return {x.h(), x.w(), d.factor, 1.0f / static_cast<float>(d.factor)};
}

}  // namespace

void CudaBackend::do_upsample_forward(const UpsampleDesc& desc, const Tensor& x, Tensor y) {
  activate();
  const Geometry g = geometry(desc, x);
  const std::size_t n = y.elements();
  if (n == 0) return;
  if (desc.mode == UpsampleMode::nearest)
    upsample_forward_kernel<false><<<blocks_for(n), 256, 0, compute_>>>(x.data, y.data, g, n);
  else
    upsample_forward_kernel<true><<<blocks_for(n), 256, 0, compute_>>>(x.data, y.data, g, n);
  check_launch("upsample_forward_kernel");
  touched(x, y);
}

void CudaBackend::do_upsample_backward(const UpsampleDesc& desc, const Tensor& dy, Tensor dx, bool accumulate) {
  activate();
  const Geometry g = geometry(desc, dx);
  const std::size_t n = dx.elements();
  if (n == 0) return;
  const unsigned blocks = blocks_for(n);
  const bool bilinear = desc.mode == UpsampleMode::bilinear;
  if (bilinear && accumulate)
    upsample_backward_kernel<true, true><<<blocks, 256, 0, compute_>>>(dy.data, dx.data, g, n);
  else if (bilinear)
    upsample_backward_kernel<true, false><<<blocks, 256, 0, compute_>>>(dy.data, dx.data, g, n);
  else if (accumulate)
    upsample_backward_kernel<false, true><<<blocks, 256, 0, compute_>>>(dy.data, dx.data, g, n);
  else
    upsample_backward_kernel<false, false><<<blocks, 256, 0, compute_>>>(dy.data, dx.data, g, n);
  check_launch("upsample_backward_kernel");
  touched(dy, dx);
}

}  // namespace cnn::cuda
