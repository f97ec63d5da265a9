#pragma once
// conv_peak's buffers: 64-byte aligned floats, filled with a fixed pattern scaled by `value`
// (value x (i x 7919 mod 1000) / 1000 - value / 2: zero for value 0) so that runs repeat.
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>

namespace cnn::bench {

struct FreeFloats {
  void operator()(float* p) const { std::free(p); }
};
using Floats = std::unique_ptr<float, FreeFloats>;

inline Floats aligned_floats(std::size_t n, float value) {
  const std::size_t bytes = (std::max<std::size_t>(n, 1) * sizeof(float) + 63) / 64 * 64;
  Floats p(static_cast<float*>(std::aligned_alloc(64, bytes)));
  if (!p) throw std::bad_alloc();
  for (std::size_t i = 0; i < n; ++i) p.get()[i] = value * static_cast<float>((i * 7919) % 1000) / 1000.f - value / 2;
  return p;
}

}  // namespace cnn::bench
