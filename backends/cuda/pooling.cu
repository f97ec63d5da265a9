// Max and average pooling. Forward: one thread per output. Backward gathers instead of
// scattering: one thread per input sums, in a fixed order, the gradients of the windows that
// route to it, so no atomics and the result does not depend on scheduling. x, and y forward, may
// be 16 bits alone (Tensor::packed16), as a step on a 16-bit plan stores them: read widened,
// written rounded. Images NCHW or channels last (Note [Channels-last images], tensor.hpp): a
// thread's element is the i-th in memory order either way, so a warp reads and writes consecutive
// values, and the sums run in the same order.
#include <cfloat>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "backends/cuda/detail/check.hpp"
#include "backends/cuda/detail/cuda_backend_impl.hpp"
#include "backends/cuda/detail/grid_stride.cuh"
#include "backends/cuda/detail/values16.cuh"
#include <cnnengine/base/error.hpp>

namespace cnn::cuda {
namespace {

struct PoolGeometry {
  int planes;  // N * C
  int channels, h, w, out_h, out_w;
  int window_h, window_w, stride_h, stride_w, pad_h, pad_w;
};

// Element i in memory order of an [N, C, rows, cols] image: its plane (n * C + c), row and column.
struct Place {
  std::size_t plane;
  int row, col;
};
template <bool kChannelsLast>
__device__ Place place_of(std::size_t i, int channels, int rows, int cols) {
  if (kChannelsLast) {
    const auto c = static_cast<int>(i % channels);
    const std::size_t pixel = i / channels;
    const auto col = static_cast<int>(pixel % cols), row = static_cast<int>(pixel / cols % rows);
    return {pixel / cols / rows * channels + c, row, col};
  }
  return {i / (std::size_t{static_cast<unsigned>(rows)} * cols), static_cast<int>(i / cols % rows),
          static_cast<int>(i % cols)};
}
// Where (plane, row, col) of an [N, C, rows, cols] image lies.
template <bool kChannelsLast>
__device__ std::size_t index_of(std::size_t plane, int row, int col, int channels, int rows, int cols) {
  if (kChannelsLast) {
    const std::size_t n = plane / channels;
    return ((n * rows + row) * cols + col) * channels + plane % channels;
  }
  return (plane * rows + row) * cols + col;
}

struct Window {
  int h0, h1, w0, w1;  // the part of the window inside the input: [h0, h1) x [w0, w1)
};

__device__ Window window_of(const PoolGeometry& g, int oh, int ow) {
  const int top = oh * g.stride_h - g.pad_h, left = ow * g.stride_w - g.pad_w;
  return {max(top, 0), min(top + g.window_h, g.h), max(left, 0), min(left + g.window_w, g.w)};
}

template <ValueFormat F, bool Max, bool kChannelsLast>
__global__ void pool_forward_kernel(ValuesIn x, ValuesOut y, PoolGeometry g) {
  const std::size_t total = std::size_t{static_cast<unsigned>(g.planes)} * g.out_h * g.out_w;
  CNN_FOR_EACH_ELEMENT(i, total) {
    const Place out = place_of<kChannelsLast>(i, g.channels, g.out_h, g.out_w);
    const Window win = window_of(g, out.row, out.col);
    float best = -FLT_MAX, sum = 0.0f;
    bool any = false;
    for (int h = win.h0; h < win.h1; ++h) {
      for (int w = win.w0; w < win.w1; ++w) {
        const float v = x.at<F>(index_of<kChannelsLast>(out.plane, h, w, g.channels, g.h, g.w));
        if (Max) {
          if (!any || v > best) best = v;
        } else {
          sum += v;
        }
        any = true;
      }
    }
    const int count = (win.h1 - win.h0) * (win.w1 - win.w0);
    y.set<F>(i, !any ? 0.0f : Max ? best : sum / static_cast<float>(count));
  }
}

template <ValueFormat F, bool Max, bool Accumulate, bool kChannelsLast>
__global__ void pool_backward_kernel(ValuesIn x, const float* dy, float* dx, PoolGeometry g) {
  const std::size_t total = std::size_t{static_cast<unsigned>(g.planes)} * g.h * g.w;
  CNN_FOR_EACH_ELEMENT(i, total) {
    const Place in = place_of<kChannelsLast>(i, g.channels, g.h, g.w);
    const int ih = in.row, iw = in.col;
    const auto x_at = [&](int h, int w) { return index_of<kChannelsLast>(in.plane, h, w, g.channels, g.h, g.w); };

    // Outputs whose window covers (ih, iw): oh * stride - pad <= ih < oh * stride - pad + window.
    const int oh_first = max(0, (ih + g.pad_h - g.window_h + g.stride_h) / g.stride_h);
    const int oh_last = min(g.out_h - 1, (ih + g.pad_h) / g.stride_h);
    const int ow_first = max(0, (iw + g.pad_w - g.window_w + g.stride_w) / g.stride_w);
    const int ow_last = min(g.out_w - 1, (iw + g.pad_w) / g.stride_w);

    float grad = 0.0f;
    for (int oh = oh_first; oh <= oh_last; ++oh) {
      for (int ow = ow_first; ow <= ow_last; ++ow) {
        const std::size_t o = index_of<kChannelsLast>(in.plane, oh, ow, g.channels, g.out_h, g.out_w);
        const Window win = window_of(g, oh, ow);
        if (ih < win.h0 || ih >= win.h1 || iw < win.w0 || iw >= win.w1) continue;
        if (Max) {
          // The window's maximum chosen as forward chooses it (the first, then any larger), from
          // x alone: y may come from another computation of x (a recomputed BatchNorm rounds
          // unlike forward's cuDNN), which no element of this x need equal.
          int best_h = win.h0, best_w = win.w0;
          float best = x.at<F>(x_at(win.h0, win.w0));
          for (int h = win.h0; h < win.h1; ++h) {
            for (int w = win.w0; w < win.w1; ++w) {
              const float v = x.at<F>(x_at(h, w));
              if (v > best) {
                best = v;
                best_h = h;
                best_w = w;
              }
            }
          }
          if (best_h == ih && best_w == iw) grad += dy[o];
        } else {
          grad += dy[o] / static_cast<float>((win.h1 - win.h0) * (win.w1 - win.w0));
        }
      }
    }
    dx[i] = Accumulate ? dx[i] + grad : grad;
  }
}

PoolGeometry geometry(const Pool2dDesc& d, const Tensor& x, const Tensor& y, const char* call) {
  if (x.shape.rank != 4 || y.shape.rank != 4 || x.n() != y.n() || x.c() != y.c()) {
    throw ShapeError(std::string(call) + ": input " + x.shape.str() + " and output " + y.shape.str() +
                     " are not matching images");
  }
  if (d.window_h < 1 || d.window_w < 1 || d.stride_h < 1 || d.stride_w < 1 || d.pad_h < 0 || d.pad_w < 0) {
    throw ConfigError(std::string(call) + ": window, stride and padding must be positive");
  }
  return {x.n() * x.c(), x.c(), x.h(), x.w(), y.h(), y.w(), d.window_h, d.window_w,
          d.stride_h, d.stride_w, d.pad_h, d.pad_w};
}

// launch(format, order) with each a std::integral_constant: the order true for channels last.
template <class Launch>
void with_order(ValueFormat format, bool channels_last, Launch&& launch) {
  with_format(format, [&](auto f) {
    if (channels_last) launch(f, std::true_type{});
    else launch(f, std::false_type{});
  });
}

}  // namespace

void CudaBackend::do_pool2d_forward(const Pool2dDesc& desc, const Tensor& x, Tensor y) {
  activate();
  const PoolGeometry g = geometry(desc, x, y, "pool2d_forward");
  require_values("pool2d_forward", {x, y});
  const std::size_t n = y.elements();
  if (n == 0) return;
  const bool is_max = desc.mode == PoolMode::max;
  with_order(product_format(), x.shape.channels_last, [&](auto f, auto channels_last) {
    constexpr ValueFormat F = decltype(f)::value;
    constexpr bool kChannelsLast = decltype(channels_last)::value;
    if (is_max)
      pool_forward_kernel<F, true, kChannelsLast><<<blocks_for(n), 256, 0, compute_>>>(values_in(x), values_out(y), g);
    else
      pool_forward_kernel<F, false, kChannelsLast><<<blocks_for(n), 256, 0, compute_>>>(values_in(x), values_out(y), g);
  });
  check_launch("pool_forward_kernel");
  touched(x, packed_range(x), y, packed_range(y));
}

void CudaBackend::do_pool2d_backward(const Pool2dDesc& desc, const Tensor& x, const Tensor& y,
                                     const Tensor& dy, Tensor dx, bool accumulate) {
  activate();
  const PoolGeometry g = geometry(desc, x, y, "pool2d_backward");
  if (dy.elements() != y.elements() || dx.elements() != x.elements()) {
    throw ShapeError("pool2d_backward: gradients " + dy.shape.str() + " and " + dx.shape.str() +
                     " do not match " + y.shape.str() + " and " + x.shape.str());
  }
  // y is not read: max pooling finds each window's maximum from x.
  require_values("pool2d_backward", {x, dy, dx}, 1);
  const std::size_t n = x.elements();
  if (n == 0) return;
  const unsigned blocks = blocks_for(n);
  const bool is_max = desc.mode == PoolMode::max;
  with_order(product_format(), x.shape.channels_last, [&](auto f, auto channels_last) {
    constexpr ValueFormat F = decltype(f)::value;
    constexpr bool L = decltype(channels_last)::value;
    const ValuesIn in = values_in(x);
    float *from = dy.data, *to = dx.data;
    if (is_max && accumulate) pool_backward_kernel<F, true, true, L><<<blocks, 256, 0, compute_>>>(in, from, to, g);
    else if (is_max) pool_backward_kernel<F, true, false, L><<<blocks, 256, 0, compute_>>>(in, from, to, g);
    else if (accumulate) pool_backward_kernel<F, false, true, L><<<blocks, 256, 0, compute_>>>(in, from, to, g);
    else pool_backward_kernel<F, false, false, L><<<blocks, 256, 0, compute_>>>(in, from, to, g);
  });
  check_launch("pool_backward_kernel");
  touched(x, packed_range(x), dy, dx);
}

}  // namespace cnn::cuda
