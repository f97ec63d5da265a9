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

// Pixel (y, x) of channel c of an interleaved or planar source, as a float.
struct Interleaved {
  const std::uint8_t* data;
  std::size_t row, channels;
  float at(int c, int y, int x) const { return data[y * row + x * channels + c]; }
};
struct Planar {
  const float* data;
  std::size_t plane, row;
  float at(int c, int y, int x) const { return data[c * plane + y * row + x]; }
};

template <typename Source>
void resize_window(const Source& src, int src_height, int src_width, int channels, float* dst, int dst_height,
                   int dst_width, const SourceWindow& window, bool mirror, float scale) {
  std::vector<Tap>& ys = tap_scratch().ys;
  std::vector<Tap>& xs = tap_scratch().xs;
  window_taps(src_height, dst_height, window.top, window.height, ys);
  window_taps(src_width, dst_width, window.left, window.width, xs);
  if (mirror) std::reverse(xs.begin(), xs.end());
  const std::size_t plane = static_cast<std::size_t>(dst_height) * static_cast<std::size_t>(dst_width);
  for (int c = 0; c < channels; ++c) {
    float* out = dst + c * plane;
    for (const Tap& ty : ys) {
      for (const Tap& tx : xs) {
        const float top = src.at(c, ty.lo, tx.lo) + tx.weight * (src.at(c, ty.lo, tx.hi) - src.at(c, ty.lo, tx.lo));
        const float bottom = src.at(c, ty.hi, tx.lo) + tx.weight * (src.at(c, ty.hi, tx.hi) - src.at(c, ty.hi, tx.lo));
        *out++ = (top + ty.weight * (bottom - top)) * scale;
      }
    }
  }
}

}  // namespace

void resize_window_hwc_to_chw(const std::uint8_t* src, int src_height, int src_width, int channels, float* dst,
                              int dst_height, int dst_width, const SourceWindow& window, bool mirror) {
  const Interleaved source{src, static_cast<std::size_t>(src_width) * static_cast<std::size_t>(channels),
                           static_cast<std::size_t>(channels)};
  resize_window(source, src_height, src_width, channels, dst, dst_height, dst_width, window, mirror, 1.0f / 255.0f);
}

void resize_window_chw(const float* src, int src_height, int src_width, int channels, float* dst, int dst_height,
                       int dst_width, const SourceWindow& window, bool mirror) {
  const Planar source{src, static_cast<std::size_t>(src_height) * static_cast<std::size_t>(src_width),
                      static_cast<std::size_t>(src_width)};
  resize_window(source, src_height, src_width, channels, dst, dst_height, dst_width, window, mirror, 1.0f);
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
