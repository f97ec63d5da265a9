#include "data/detail/resize.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace cnn::data {
namespace {

struct Tap {
  int lo, hi;     // the two source coordinates
  float weight;   // of hi
};

// The output's `dst` pixels along one axis, from the source's `src` scaled to `scaled`, starting at
// pixel `offset` of that. Into `result`, which keeps its room from call to call (a loader thread
// resizes every image through the same two).
void taps(int src, int dst, std::int64_t scaled, std::int64_t offset, std::vector<Tap>& result) {
  result.resize(static_cast<std::size_t>(dst));
  const float scale = static_cast<float>(src) / static_cast<float>(scaled);
  for (int i = 0; i < dst; ++i) {
    const float at = (static_cast<float>(i + offset) + 0.5f) * scale - 0.5f;
    const float x = std::clamp(at, 0.0f, static_cast<float>(src - 1));
    const int lo = static_cast<int>(x);
    const int hi = std::min(lo + 1, src - 1);
    result[static_cast<std::size_t>(i)] = {lo, hi, x - static_cast<float>(lo)};
  }
}

// The same for a window of `length` source pixels from `start`: source pixel centres are aligned
// within the window, and a sample beyond the window's edge (or the source's) repeats the edge.
void window_taps(int src, int dst, double start, double length, std::vector<Tap>& result) {
  result.resize(static_cast<std::size_t>(dst));
  const double scale = length / dst;
  const double first = std::max(0.0, start), last = std::max(first, std::min<double>(src - 1, start + length - 1));
  for (int i = 0; i < dst; ++i) {
    const double x = std::clamp(start + (i + 0.5) * scale - 0.5, first, last);
    const int lo = static_cast<int>(x);
    const int hi = std::min(lo + 1, src - 1);
    result[static_cast<std::size_t>(i)] = {lo, hi, static_cast<float>(x - lo)};
  }
}

struct TapScratch {
  std::vector<Tap> ys, xs;
};
TapScratch& tap_scratch() {
  thread_local TapScratch scratch;
  return scratch;
}

Framing stretched(int dst_height, int dst_width) { return {dst_height, dst_width, 0, 0}; }

}  // namespace

Framing frame_image(int src_height, int src_width, int dst_height, int dst_width, int shorter_side) {
  if (shorter_side <= 0) return stretched(dst_height, dst_width);
  const bool wide = src_height <= src_width;
  const std::int64_t shorter = wide ? src_height : src_width, longer = wide ? src_width : src_height;
  const std::int64_t scaled_longer = std::int64_t{shorter_side} * longer / shorter;
  Framing f;
  f.scaled_height = wide ? shorter_side : scaled_longer;
  f.scaled_width = wide ? scaled_longer : shorter_side;
  f.top = static_cast<std::int64_t>(std::nearbyint(static_cast<double>(f.scaled_height - dst_height) / 2.0));
  f.left = static_cast<std::int64_t>(std::nearbyint(static_cast<double>(f.scaled_width - dst_width) / 2.0));
  return f;
}

void resize_bilinear_hwc_to_chw(const std::uint8_t* src, int src_height, int src_width, int channels,
                                std::uint8_t* dst, int dst_height, int dst_width) {
  resize_bilinear_hwc_to_chw(src, src_height, src_width, channels, dst, dst_height, dst_width,
                             stretched(dst_height, dst_width));
}

void resize_bilinear_hwc_to_chw(const std::uint8_t* src, int src_height, int src_width, int channels,
                                std::uint8_t* dst, int dst_height, int dst_width, const Framing& framing) {
  const std::size_t src_row = static_cast<std::size_t>(src_width) * channels;
  const std::size_t plane = static_cast<std::size_t>(dst_height) * dst_width;
  if (src_height == framing.scaled_height && src_width == framing.scaled_width && src_height == dst_height &&
      src_width == dst_width) {
    for (std::size_t p = 0; p < plane; ++p)
      for (int c = 0; c < channels; ++c) dst[c * plane + p] = src[p * channels + c];
    return;
  }
  std::vector<Tap>& ys = tap_scratch().ys;
  std::vector<Tap>& xs = tap_scratch().xs;
  taps(src_height, dst_height, framing.scaled_height, framing.top, ys);
  taps(src_width, dst_width, framing.scaled_width, framing.left, xs);
  for (int c = 0; c < channels; ++c) {
    std::uint8_t* out = dst + c * plane;
    for (int y = 0; y < dst_height; ++y) {
      const Tap& ty = ys[static_cast<std::size_t>(y)];
      const std::uint8_t* row0 = src + ty.lo * src_row + c;
      const std::uint8_t* row1 = src + ty.hi * src_row + c;
      for (int x = 0; x < dst_width; ++x) {
        const Tap& tx = xs[static_cast<std::size_t>(x)];
        float top = row0[tx.lo * channels] + tx.weight * (row0[tx.hi * channels] - row0[tx.lo * channels]);
        float bottom = row1[tx.lo * channels] + tx.weight * (row1[tx.hi * channels] - row1[tx.lo * channels]);
        float value = top + ty.weight * (bottom - top);
        *out++ = static_cast<std::uint8_t>(std::clamp(std::lround(value), 0L, 255L));
      }
    }
  }
}

namespace {

// The window's taps along each axis, into the thread's scratch; mirrored left-right.
TapScratch& window_taps(int src_height, int src_width, int dst_height, int dst_width, const SourceWindow& window,
                        bool mirror) {
  TapScratch& t = tap_scratch();
  window_taps(src_height, dst_height, window.top, window.height, t.ys);
  window_taps(src_width, dst_width, window.left, window.width, t.xs);
  if (mirror) std::reverse(t.xs.begin(), t.xs.end());
  return t;
}

// Interleaved pixels of C channels: each output pixel's four source pixels read once for all
// channels.
template <int C>
void resize_window_interleaved(const std::uint8_t* src, int src_width, float* dst, int dst_height, int dst_width,
                               const TapScratch& t) {
  const std::size_t row = static_cast<std::size_t>(src_width) * C;
  const std::size_t plane = static_cast<std::size_t>(dst_height) * static_cast<std::size_t>(dst_width);
  constexpr float kScale = 1.0f / 255.0f;
  for (std::size_t y = 0; y < t.ys.size(); ++y) {
    const Tap ty = t.ys[y];
    const std::uint8_t* row0 = src + static_cast<std::size_t>(ty.lo) * row;
    const std::uint8_t* row1 = src + static_cast<std::size_t>(ty.hi) * row;
    float* out = dst + y * static_cast<std::size_t>(dst_width);
    for (std::size_t x = 0; x < t.xs.size(); ++x) {
      const Tap tx = t.xs[x];
      const std::uint8_t* a = row0 + tx.lo * C;
      const std::uint8_t* b = row0 + tx.hi * C;
      const std::uint8_t* c = row1 + tx.lo * C;
      const std::uint8_t* d = row1 + tx.hi * C;
      for (int k = 0; k < C; ++k) {
        const float top = a[k] + tx.weight * static_cast<float>(b[k] - a[k]);
        const float bottom = c[k] + tx.weight * static_cast<float>(d[k] - c[k]);
        out[k * plane + x] = (top + ty.weight * (bottom - top)) * kScale;
      }
    }
  }
}

}  // namespace

void resize_window_hwc_to_chw(const std::uint8_t* src, int src_height, int src_width, int channels, float* dst,
                              int dst_height, int dst_width, const SourceWindow& window, bool mirror) {
  const TapScratch& t = window_taps(src_height, src_width, dst_height, dst_width, window, mirror);
  if (channels == 3) resize_window_interleaved<3>(src, src_width, dst, dst_height, dst_width, t);
  else resize_window_interleaved<1>(src, src_width, dst, dst_height, dst_width, t);
}

void resize_window_planar(const std::uint8_t* src, int src_height, int src_width, int channels, float* dst,
                          int dst_height, int dst_width, const SourceWindow& window, bool mirror) {
  const TapScratch& t = window_taps(src_height, src_width, dst_height, dst_width, window, mirror);
  thread_local std::vector<float> rows;
  const auto width = static_cast<std::size_t>(dst_width);
  rows.resize(2 * width);
  const std::size_t src_plane = static_cast<std::size_t>(src_height) * static_cast<std::size_t>(src_width);
  const std::size_t plane = static_cast<std::size_t>(dst_height) * width;
  for (int c = 0; c < channels; ++c) {
    const std::uint8_t* source = src + c * src_plane;
    float* upper = rows.data();
    float* lower = upper + width;
    int upper_row = -1, lower_row = -1;
    auto along_x = [&](int r, float* out) {
      const std::uint8_t* row = source + static_cast<std::size_t>(r) * static_cast<std::size_t>(src_width);
      for (std::size_t x = 0; x < width; ++x) {
        const Tap tx = t.xs[x];
        const float lo = row[tx.lo];
        out[x] = lo + tx.weight * (static_cast<float>(row[tx.hi]) - lo);
      }
    };
    float* out = dst + c * plane;
    for (const Tap& ty : t.ys) {
      if (upper_row != ty.lo) {
        if (lower_row == ty.lo) {
          std::swap(upper, lower);
          std::swap(upper_row, lower_row);
        } else {
          along_x(ty.lo, upper);
          upper_row = ty.lo;
        }
      }
      if (lower_row != ty.hi) {
        along_x(ty.hi, lower);
        lower_row = ty.hi;
      }
      const float wy = ty.weight;
      constexpr float kScale = 1.0f / 255.0f;  // here, where the loop is vectorised
      for (std::size_t x = 0; x < width; ++x) out[x] = (upper[x] + wy * (lower[x] - upper[x])) * kScale;
      out += width;
    }
  }
}

void resize_window_chw(const float* src, int src_height, int src_width, int channels, float* dst, int dst_height,
                       int dst_width, const SourceWindow& window, bool mirror) {
  const TapScratch& t = window_taps(src_height, src_width, dst_height, dst_width, window, mirror);
  const std::size_t src_plane = static_cast<std::size_t>(src_height) * static_cast<std::size_t>(src_width);
  for (int c = 0; c < channels; ++c) {
    const float* plane = src + c * src_plane;
    for (const Tap& ty : t.ys) {
      const float* row0 = plane + static_cast<std::size_t>(ty.lo) * static_cast<std::size_t>(src_width);
      const float* row1 = plane + static_cast<std::size_t>(ty.hi) * static_cast<std::size_t>(src_width);
      for (const Tap& tx : t.xs) {
        const float top = row0[tx.lo] + tx.weight * (row0[tx.hi] - row0[tx.lo]);
        const float bottom = row1[tx.lo] + tx.weight * (row1[tx.hi] - row1[tx.lo]);
        *dst++ = top + ty.weight * (bottom - top);
      }
    }
  }
}

void resize_nearest(const std::uint8_t* src, int src_height, int src_width, std::uint8_t* dst, int dst_height,
                    int dst_width) {
  resize_nearest(src, src_height, src_width, dst, dst_height, dst_width, stretched(dst_height, dst_width));
}

void resize_nearest(const std::uint8_t* src, int src_height, int src_width, std::uint8_t* dst, int dst_height,
                    int dst_width, const Framing& framing) {
  // floor((i + offset) * src / scaled), within the source whatever the framing
  auto index = [](int i, std::int64_t offset, int src, std::int64_t scaled) {
    const std::int64_t at = (std::int64_t{i} + offset) * src / scaled;
    return static_cast<std::size_t>(std::clamp<std::int64_t>(at, 0, src - 1));
  };
  std::vector<std::size_t> xs(static_cast<std::size_t>(dst_width));
  for (int x = 0; x < dst_width; ++x)
    xs[static_cast<std::size_t>(x)] = index(x, framing.left, src_width, framing.scaled_width);
  for (int y = 0; y < dst_height; ++y) {
    const std::uint8_t* row = src + index(y, framing.top, src_height, framing.scaled_height) * src_width;
    for (int x = 0; x < dst_width; ++x) *dst++ = row[xs[static_cast<std::size_t>(x)]];
  }
}

}  // namespace cnn::data
