#pragma once
// Where the values of an image [N, C, H, W] lie channels last (Note [Channels-last images],
// engine/core/tensor.hpp), and whole images put in either order: the tests' reference for the
// backends' and the plan's channels-last images.
#include <cstddef>
#include <vector>

#include <cnnengine/engine/core/tensor.hpp>

namespace cnn::testing {

// Value i of `shape` in NCHW order, and its place channels last (NHWC).
inline std::size_t channels_last_index(const Shape& shape, std::size_t i) {
  const auto c = static_cast<std::size_t>(shape[1]);
  const std::size_t plane = static_cast<std::size_t>(shape[2]) * static_cast<std::size_t>(shape[3]);
  const std::size_t pixel = i % plane, channel = i / plane % c, sample = i / plane / c;
  return (sample * plane + pixel) * c + channel;
}

inline std::vector<float> to_channels_last(const std::vector<float>& nchw, const Shape& shape) {
  std::vector<float> nhwc(nchw.size());
  for (std::size_t i = 0; i < nchw.size(); ++i) nhwc[channels_last_index(shape, i)] = nchw[i];
  return nhwc;
}

inline std::vector<float> from_channels_last(const std::vector<float>& nhwc, const Shape& shape) {
  std::vector<float> nchw(nhwc.size());
  for (std::size_t i = 0; i < nchw.size(); ++i) nchw[i] = nhwc[channels_last_index(shape, i)];
  return nchw;
}

}  // namespace cnn::testing
