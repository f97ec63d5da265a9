// Constant padding of each (sample, channel) plane, as the CPU backend pads: forward one thread per
// output (the border's value, or the input inside it), backward one thread per input (its gradient
// is one output's). No atomics: the same bits every run.
#include <cstddef>

#include "backends/cuda/detail/check.hpp"
#include "backends/cuda/detail/cuda_backend_impl.hpp"
#include "backends/cuda/detail/grid_stride.cuh"

namespace cnn::cuda {
namespace {

struct Geometry {
  int h, w, out_h, out_w, top, left;
};

__global__ void pad_forward_kernel(const float* x, float* y, Geometry g, float value, std::size_t total) {
  CNN_FOR_EACH_ELEMENT(i, total) {
    const int ow = static_cast<int>(i % g.out_w);
    const int oh = static_cast<int>(i / g.out_w % g.out_h);
    const std::size_t plane = i / (static_cast<std::size_t>(g.out_h) * g.out_w);
    const int ih = oh - g.top, iw = ow - g.left;
    const bool inside = ih >= 0 && ih < g.h && iw >= 0 && iw < g.w;
    y[i] = inside ? x[(plane * g.h + ih) * g.w + iw] : value;
  }
}

template <bool Accumulate>
__global__ void pad_backward_kernel(const float* dy, float* dx, Geometry g, std::size_t total) {
  CNN_FOR_EACH_ELEMENT(i, total) {
    const int iw = static_cast<int>(i % g.w);
    const int ih = static_cast<int>(i / g.w % g.h);
    const std::size_t plane = i / (static_cast<std::size_t>(g.h) * g.w);
    const float grad = dy[(plane * g.out_h + ih + g.top) * g.out_w + iw + g.left];
    dx[i] = Accumulate ? dx[i] + grad : grad;
  }
}

// x and its padding y, as the front checked them.
Geometry geometry(const PadDesc& d, const Tensor& x, const Tensor& y) {
  return {x.h(), x.w(), y.h(), y.w(), d.top, d.left};
}

}  // namespace

void CudaBackend::do_pad_forward(const PadDesc& desc, const Tensor& x, Tensor y) {
  activate();
  const std::size_t n = y.elements();
  if (n == 0) return;
  pad_forward_kernel<<<blocks_for(n), 256, 0, compute_>>>(x.data, y.data, geometry(desc, x, y), desc.value, n);
  check_launch("pad_forward_kernel");
  touched(x, y);
}

void CudaBackend::do_pad_backward(const PadDesc& desc, const Tensor& dy, Tensor dx, bool accumulate) {
  activate();
  const std::size_t n = dx.elements();
  if (n == 0) return;
  const Geometry g = geometry(desc, dx, dy);
  if (accumulate) pad_backward_kernel<true><<<blocks_for(n), 256, 0, compute_>>>(dy.data, dx.data, g, n);
  else pad_backward_kernel<false><<<blocks_for(n), 256, 0, compute_>>>(dy.data, dx.data, g, n);
  check_launch("pad_backward_kernel");
  touched(dy, dx);
}

}  // namespace cnn::cuda
