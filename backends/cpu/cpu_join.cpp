// Concatenation's channel copies and the element-wise product (same shapes, or one factor per
// sample and channel: the squeeze-and-excitation gate). Parallel over elements or planes; every
// sum runs in a fixed order, so the bits do not depend on the threads.
#include <algorithm>
#include <cstring>
#include <string>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/detail/parallel.hpp"
#include <cnnengine/base/error.hpp>

namespace cnn {
namespace {

// Elements per (sample, channel): H x W of an image, 1 of a flat tensor.
std::size_t plane_of(const Tensor& t) { return t.shape.rank >= 4 ? static_cast<std::size_t>(t.h()) * t.w() : 1; }

// Whether b is [N, C, 1, 1] under an [N, C, H, W] a rather than a's shape (the front checked
// that it is one of them).
bool per_channel(const Tensor& a, const Tensor& b) { return b.elements() != a.elements(); }

// sum of a[i] * b[i] over n elements, in eight fixed lanes then a fixed tree: vectorises, and
// the order depends on n alone.
float dot(const float* a, const float* b, std::size_t n) {
  float lane[8] = {};
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) lane[k] += a[i + k] * b[i + k];
  for (int k = 0; i < n; ++i, ++k) lane[k] += a[i] * b[i];
  return ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
}

}  // namespace

void CpuBackend::do_copy_channels(const Tensor& from, int from_channel, Tensor to, int to_channel, int channels,
                                  bool accumulate) {
  const std::size_t plane = plane_of(from);
  const std::size_t block = static_cast<std::size_t>(channels) * plane;  // contiguous per sample
  const std::size_t from_stride = static_cast<std::size_t>(from.c()) * plane;
  const std::size_t to_stride = static_cast<std::size_t>(to.c()) * plane;
  const float* src = from.data + static_cast<std::size_t>(from_channel) * plane;
  float* dst = to.data + static_cast<std::size_t>(to_channel) * plane;
  cpu::parallel_elements(threads_, block * static_cast<std::size_t>(from.n()), [&](std::size_t lo, std::size_t hi) {
    while (lo < hi) {
      const std::size_t n = lo / block, offset = lo % block;
      const std::size_t count = std::min(block - offset, hi - lo);
      const float* s = src + n * from_stride + offset;
      float* d = dst + n * to_stride + offset;
      if (accumulate)
        for (std::size_t i = 0; i < count; ++i) d[i] += s[i];
      else
        std::memcpy(d, s, count * sizeof(float));
      lo += count;
    }
  });
}

void CpuBackend::do_multiply(const Tensor& a, const Tensor& b, Tensor y) {
  if (!per_channel(a, b)) {
    cpu::parallel_elements(threads_, a.elements(), [&](std::size_t lo, std::size_t hi) {
      for (std::size_t i = lo; i < hi; ++i) y.data[i] = a.data[i] * b.data[i];
    });
    return;
  }
  const std::size_t plane = plane_of(a);
  cpu::parallel_ranges(threads_, b.elements(), [&](int, std::size_t lo, std::size_t hi) {
    for (std::size_t p = lo; p < hi; ++p) {
      const float g = b.data[p];
      const float* in = a.data + p * plane;
      float* out = y.data + p * plane;
      for (std::size_t i = 0; i < plane; ++i) out[i] = in[i] * g;
    }
  });
}

void CpuBackend::do_multiply_backward(const Tensor& a, const Tensor& b, const Tensor& dy, Tensor da, bool accumulate_a,
                                      Tensor db, bool accumulate_b) {
  const bool want_a = !da.empty(), want_b = !db.empty();
  if (!per_channel(a, b)) {
    // da is written before db is read, element by element: both may be one buffer (x * x).
    cpu::parallel_elements(threads_, a.elements(), [&](std::size_t lo, std::size_t hi) {
      if (want_a)
        for (std::size_t i = lo; i < hi; ++i) {
          const float g = dy.data[i] * b.data[i];
          da.data[i] = accumulate_a ? da.data[i] + g : g;
        }
      if (want_b)
        for (std::size_t i = lo; i < hi; ++i) {
          const float g = dy.data[i] * a.data[i];
          db.data[i] = accumulate_b ? db.data[i] + g : g;
        }
    });
    return;
  }
  const std::size_t plane = plane_of(a);
  cpu::parallel_ranges(threads_, b.elements(), [&](int, std::size_t lo, std::size_t hi) {
    for (std::size_t p = lo; p < hi; ++p) {
      const float* g_out = dy.data + p * plane;
      const float* x = a.data + p * plane;
      const float factor = b.data[p];
      float* g_in = want_a ? da.data + p * plane : nullptr;
      if (want_a && want_b) {
        // One pass over dy for both: the gate's sum in dot's lanes and order.
        float lane[8] = {};
        std::size_t i = 0;
        for (; i + 8 <= plane; i += 8)
          for (int k = 0; k < 8; ++k) {
            const float g = g_out[i + k];
            g_in[i + k] = accumulate_a ? g_in[i + k] + g * factor : g * factor;
            lane[k] += g * x[i + k];
          }
        for (int k = 0; i < plane; ++i, ++k) {
          const float g = g_out[i];
          g_in[i] = accumulate_a ? g_in[i] + g * factor : g * factor;
          lane[k] += g * x[i];
        }
        const float sum = ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
        db.data[p] = accumulate_b ? db.data[p] + sum : sum;
      } else if (want_a) {
        if (accumulate_a)
          for (std::size_t i = 0; i < plane; ++i) g_in[i] += g_out[i] * factor;
        else
          for (std::size_t i = 0; i < plane; ++i) g_in[i] = g_out[i] * factor;
      } else if (want_b) {
        const float sum = dot(g_out, x, plane);
        db.data[p] = accumulate_b ? db.data[p] + sum : sum;
      }
    }
  });
}

}  // namespace cnn
