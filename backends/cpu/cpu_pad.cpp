// Constant padding of each (sample, channel) plane: forward writes the border's value and copies
// the plane inside it, row by row; backward copies (or adds) the inner window of dy back. Parallel
// over planes; each output written once, so the same bits on every run.
#include <algorithm>
#include <cstddef>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/detail/parallel.hpp"

namespace cnn {
namespace {

struct Planes {
  std::size_t count;
  int h, w, out_h, out_w;
};

// x and its padding y, as the front checked them.
Planes planes(const Tensor& x, const Tensor& y) {
  return {static_cast<std::size_t>(x.n()) * static_cast<std::size_t>(x.c()), x.h(), x.w(), y.h(), y.w()};
}

}  // namespace

void CpuBackend::do_pad_forward(const PadDesc& d, const Tensor& x, Tensor y) {
  const Planes p = planes(x, y);
  const std::size_t in_plane = static_cast<std::size_t>(p.h) * p.w;
  const std::size_t out_plane = static_cast<std::size_t>(p.out_h) * p.out_w;
  cpu::parallel_ranges(threads_, p.count, [&](int, std::size_t b, std::size_t e) {
    for (std::size_t plane = b; plane < e; ++plane) {
      const float* in = x.data + plane * in_plane;
      float* out = y.data + plane * out_plane;
      std::fill(out, out + static_cast<std::size_t>(d.top) * p.out_w, d.value);
      for (int r = 0; r < p.h; ++r) {
        float* row = out + static_cast<std::size_t>(d.top + r) * p.out_w;
        std::fill(row, row + d.left, d.value);
        std::copy(in + static_cast<std::size_t>(r) * p.w, in + static_cast<std::size_t>(r + 1) * p.w, row + d.left);
        std::fill(row + d.left + p.w, row + p.out_w, d.value);
      }
      std::fill(out + static_cast<std::size_t>(d.top + p.h) * p.out_w, out + out_plane, d.value);
    }
  });
}

void CpuBackend::do_pad_backward(const PadDesc& d, const Tensor& dy, Tensor dx, bool accumulate) {
  const Planes p = planes(dx, dy);
  const std::size_t in_plane = static_cast<std::size_t>(p.h) * p.w;
  const std::size_t out_plane = static_cast<std::size_t>(p.out_h) * p.out_w;
  cpu::parallel_ranges(threads_, p.count, [&](int, std::size_t b, std::size_t e) {
    for (std::size_t plane = b; plane < e; ++plane)
      for (int r = 0; r < p.h; ++r) {
        const float* from = dy.data + plane * out_plane + static_cast<std::size_t>(d.top + r) * p.out_w + d.left;
        float* to = dx.data + plane * in_plane + static_cast<std::size_t>(r) * p.w;
        if (accumulate)
          for (int c = 0; c < p.w; ++c) to[c] += from[c];
        else
          std::copy(from, from + p.w, to);
      }
  });
}

}  // namespace cnn
