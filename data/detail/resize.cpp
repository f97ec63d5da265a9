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

std::vector<Tap> taps(int src, int dst) {
  std::vector<Tap> result(static_cast<std::size_t>(dst));
  const float scale = static_cast<float>(src) / static_cast<float>(dst);
  for (int i = 0; i < dst; ++i) {
    float x = std::max(0.0f, (static_cast<float>(i) + 0.5f) * scale - 0.5f);
    int lo = std::min(static_cast<int>(x), src - 1);
    int hi = std::min(lo + 1, src - 1);
    result[static_cast<std::size_t>(i)] = {lo, hi, x - static_cast<float>(lo)};
  }
  return result;
}

}  // namespace

void resize_bilinear_hwc_to_chw(const std::uint8_t* src, int src_height, int src_width, int channels,
                                std::uint8_t* dst, int dst_height, int dst_width) {
  const std::size_t src_row = static_cast<std::size_t>(src_width) * channels;
  const std::size_t plane = static_cast<std::size_t>(dst_height) * dst_width;
  if (src_height == dst_height && src_width == dst_width) {
    for (std::size_t p = 0; p < plane; ++p)
      for (int c = 0; c < channels; ++c) dst[c * plane + p] = src[p * channels + c];
    return;
  }
  const std::vector<Tap> ys = taps(src_height, dst_height);
  const std::vector<Tap> xs = taps(src_width, dst_width);
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

void resize_nearest(const std::uint8_t* src, int src_height, int src_width, std::uint8_t* dst, int dst_height,
                    int dst_width) {
  std::vector<std::size_t> xs(static_cast<std::size_t>(dst_width));
  for (int x = 0; x < dst_width; ++x)
    xs[static_cast<std::size_t>(x)] = static_cast<std::size_t>(std::int64_t{x} * src_width / dst_width);
  for (int y = 0; y < dst_height; ++y) {
    const std::uint8_t* row = src + static_cast<std::size_t>(std::int64_t{y} * src_height / dst_height) * src_width;
    for (int x = 0; x < dst_width; ++x) *dst++ = row[xs[static_cast<std::size_t>(x)]];
  }
}

}  // namespace cnn::data
