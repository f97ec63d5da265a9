// Upsampling by a whole factor F, PyTorch's nn.Upsample: nearest (each pixel F x F times) and
// bilinear with align_corners=False, each output's source position and weights computed as
// PyTorch computes them (area_pixel_compute_source_index). Parallel over (sample, channel)
// planes. Backward gathers: each input gradient sums, in a fixed order, the outputs it fed.
#include <algorithm>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/detail/parallel.hpp"
#include <cnnengine/base/error.hpp>

namespace cnn {
namespace {

struct Geometry {
  std::size_t planes;
  int h, w, factor;
  int out_h() const { return h * factor; }
  int out_w() const { return w * factor; }
};

// x and its upsampling y, as the front checked them.
Geometry geometry(const UpsampleDesc& d, const Tensor& x) {
  return {static_cast<std::size_t>(x.n()) * x.c(), x.h(), x.w(), d.factor};
}

// Output o of an axis of `length` inputs reads inputs i0 and i1 with weights 1 - l1 and l1.
struct Taps {
  int i0, i1;
  float l1;
};

Taps taps(int o, int length, float scale) {
  const float src = std::max(scale * (static_cast<float>(o) + 0.5f) - 0.5f, 0.0f);
  const int i0 = static_cast<int>(src);
  return {i0, i0 + (i0 < length - 1 ? 1 : 0), src - static_cast<float>(i0)};
}

// How much output o's value owes input i.
float weight(int o, int i, int length, float scale) {
  const Taps t = taps(o, length, scale);
  return (t.i0 == i ? 1.0f - t.l1 : 0.0f) + (t.i1 == i ? t.l1 : 0.0f);
}

// The outputs whose taps may reach input i: [first, last).
int first_output(int i, int factor) { return std::max(0, (i - 1) * factor); }
int last_output(int i, int factor, int out_length) { return std::min(out_length, (i + 2) * factor); }

void nearest_forward_plane(const float* in, float* out, const Geometry& g) {
  const int f = g.factor, ow = g.out_w();
  for (int ih = 0; ih < g.h; ++ih) {
    const float* src = in + static_cast<std::size_t>(ih) * g.w;
    float* row = out + static_cast<std::size_t>(ih) * f * ow;
    if (f == 2) {
      for (int iw = 0; iw < g.w; ++iw) row[2 * iw] = row[2 * iw + 1] = src[iw];
    } else {
      for (int iw = 0; iw < g.w; ++iw)
        for (int k = 0; k < f; ++k) row[iw * f + k] = src[iw];
    }
    for (int k = 1; k < f; ++k) std::copy(row, row + ow, row + static_cast<std::size_t>(k) * ow);
  }
}

void nearest_backward_plane(const float* grad_out, float* grad_in, const Geometry& g, bool accumulate) {
  const int f = g.factor, ow = g.out_w();
  for (int ih = 0; ih < g.h; ++ih) {
    const float* rows = grad_out + static_cast<std::size_t>(ih) * f * ow;
    float* dst = grad_in + static_cast<std::size_t>(ih) * g.w;
    if (f == 2) {
      const float* r1 = rows + ow;
      for (int iw = 0; iw < g.w; ++iw) {
        const float s = (rows[2 * iw] + rows[2 * iw + 1]) + (r1[2 * iw] + r1[2 * iw + 1]);
        dst[iw] = accumulate ? dst[iw] + s : s;
      }
      continue;
    }
    for (int iw = 0; iw < g.w; ++iw) {
      float s = 0.0f;
      for (int r = 0; r < f; ++r)
        for (int k = 0; k < f; ++k) s += rows[static_cast<std::size_t>(r) * ow + iw * f + k];
      dst[iw] = accumulate ? dst[iw] + s : s;
    }
  }
}

// Columns are blended vertically into a small buffer on the stack, a chunk at a time, then
// interpolated across.
constexpr int kChunk = 1024;

void bilinear_forward_plane(const float* in, float* out, const Geometry& g) {
  const int f = g.factor, oh_count = g.out_h(), ow_count = g.out_w();
  const float scale = 1.0f / static_cast<float>(f);
  float blend[kChunk + 2];
  for (int oh = 0; oh < oh_count; ++oh) {
    const Taps v = taps(oh, g.h, scale);
    const float* r0 = in + static_cast<std::size_t>(v.i0) * g.w;
    const float* r1 = in + static_cast<std::size_t>(v.i1) * g.w;
    const float v0 = 1.0f - v.l1, v1 = v.l1;
    float* row = out + static_cast<std::size_t>(oh) * ow_count;
    for (int c0 = 0; c0 < g.w; c0 += kChunk) {
      const int c1 = std::min(g.w, c0 + kChunk);
      const int base = std::max(0, c0 - 1), end = std::min(g.w, c1 + 1);  // the columns outputs may read
      for (int i = base; i < end; ++i) blend[i - base] = v0 * r0[i] + v1 * r1[i];
      const float* t = blend - base;  // t[i]: column i blended
      int o = c0 * f;
      const int o_end = c1 * f;
      if (f == 2) {
        // Interior: out[2j] = 0.25 t[j - 1] + 0.75 t[j], out[2j + 1] = 0.75 t[j] + 0.25 t[j + 1]: the
        // weights PyTorch's formula gives there, exactly.
        const int j0 = std::max(c0, 1), j1 = std::min(c1, g.w - 1);
        for (; o < 2 * j0; ++o) {
          const Taps h = taps(o, g.w, scale);
          row[o] = (1.0f - h.l1) * t[h.i0] + h.l1 * t[h.i1];
        }
        for (int j = j0; j < j1; ++j) {
          row[2 * j] = 0.25f * t[j - 1] + 0.75f * t[j];
          row[2 * j + 1] = 0.75f * t[j] + 0.25f * t[j + 1];
        }
        o = std::max(o, 2 * j1);
      }
      for (; o < o_end; ++o) {
        const Taps h = taps(o, g.w, scale);
        row[o] = (1.0f - h.l1) * t[h.i0] + h.l1 * t[h.i1];
      }
    }
  }
}

// dx[ih][iw] = sum over rows oh of wv(oh, ih) x (sum over columns ow of wh(ow, iw) x dy[oh][ow]),
// rows and columns in increasing order. The row sums for a chunk of input columns go to `sums`.
void bilinear_backward_plane(const float* grad_out, float* grad_in, const Geometry& g, bool accumulate, float* sums,
                             int chunk) {
  const int f = g.factor, oh_count = g.out_h(), ow_count = g.out_w();
  const float scale = 1.0f / static_cast<float>(f);
  for (int ih = 0; ih < g.h; ++ih) {
    const int oh0 = first_output(ih, f), oh1 = last_output(ih, f, oh_count);
    float* dst = grad_in + static_cast<std::size_t>(ih) * g.w;
    for (int c0 = 0; c0 < g.w; c0 += chunk) {
      const int c1 = std::min(g.w, c0 + chunk);
      const int o0 = first_output(c0, f), o1 = last_output(c1 - 1, f, ow_count);
      float* s = sums - o0;  // s[ow]
      std::fill(sums, sums + (o1 - o0), 0.0f);
      for (int oh = oh0; oh < oh1; ++oh) {
        const float wv = weight(oh, ih, g.h, scale);
        if (wv == 0.0f) continue;
        const float* src = grad_out + static_cast<std::size_t>(oh) * ow_count;
        for (int o = o0; o < o1; ++o) s[o] += wv * src[o];
      }
      for (int iw = c0; iw < c1; ++iw) {
        float total = 0.0f;
        const int first = first_output(iw, f), last = last_output(iw, f, ow_count);
        if (f == 2 && iw > 0 && iw + 1 < g.w) {
          total = ((0.25f * s[2 * iw - 1] + 0.75f * s[2 * iw]) + 0.75f * s[2 * iw + 1]) + 0.25f * s[2 * iw + 2];
        } else {
          for (int o = first; o < last; ++o) total += weight(o, iw, g.w, scale) * s[o];
        }
        dst[iw] = accumulate ? dst[iw] + total : total;
      }
    }
  }
}

}  // namespace

void CpuBackend::do_upsample_forward(const UpsampleDesc& d, const Tensor& x, Tensor y) {
  const Geometry g = geometry(d, x);
  const std::size_t in_plane = static_cast<std::size_t>(g.h) * g.w;
  const std::size_t out_plane = in_plane * g.factor * g.factor;
  cpu::parallel_ranges(threads_, g.planes, [&](int, std::size_t b, std::size_t e) {
    for (std::size_t p = b; p < e; ++p) {
      if (d.mode == UpsampleMode::nearest)
        nearest_forward_plane(x.data + p * in_plane, y.data + p * out_plane, g);
      else
        bilinear_forward_plane(x.data + p * in_plane, y.data + p * out_plane, g);
    }
  });
}

void CpuBackend::do_upsample_backward(const UpsampleDesc& d, const Tensor& dy, Tensor dx, bool accumulate) {
  const Geometry g = geometry(d, dx);
  const std::size_t in_plane = static_cast<std::size_t>(g.h) * g.w;
  const std::size_t out_plane = in_plane * g.factor * g.factor;
  if (d.mode == UpsampleMode::nearest) {
    cpu::parallel_ranges(threads_, g.planes, [&](int, std::size_t b, std::size_t e) {
      for (std::size_t p = b; p < e; ++p)
        nearest_backward_plane(dy.data + p * out_plane, dx.data + p * in_plane, g, accumulate);
    });
    return;
  }
  // Row sums for `chunk` input columns span at most (chunk + 2) x F outputs: on the stack, but for
  // factors so large that even one column's do not fit there.
  constexpr int kSums = 8192;
  const int chunk = std::max(1, kSums / g.factor - 2);
  const bool on_stack = static_cast<long long>(chunk + 2) * g.factor <= kSums;
  cpu::parallel_ranges(threads_, g.planes, [&](int, std::size_t b, std::size_t e) {
    float stack_sums[kSums];
    std::vector<float> heap_sums(on_stack ? 0 : static_cast<std::size_t>(3) * g.factor);
    float* sums = on_stack ? stack_sums : heap_sums.data();
    for (std::size_t p = b; p < e; ++p)
      bilinear_backward_plane(dy.data + p * out_plane, dx.data + p * in_plane, g, accumulate, sums, chunk);
  });
}

}  // namespace cnn
