#pragma once
// What the CPU convolution tests share: a fixed pattern of inputs, a workspace of exactly the
// bytes a pass asks for (64-byte aligned, filled with NaN, so a pass that reads what it did not
// write shows it), and a comparison to the bit.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include <cnnengine/engine/core/backend.hpp>

namespace cnn::testing {

// Values in [-1, 1], a different sequence for each seed.
inline std::vector<float> pattern(std::size_t n, unsigned seed) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(((i * 2654435761u + seed * 40503u) % 2001) / 1000.0 - 1.0);
  return v;
}

struct NanWorkspace {
  std::unique_ptr<float[]> owner;
  Workspace ws;
  explicit NanWorkspace(std::size_t bytes) : owner(new float[bytes / sizeof(float) + 16]) {
    void* p = owner.get();
    std::size_t space = bytes + 16 * sizeof(float);
    ws = {std::align(64, bytes, p, space), bytes};
    std::fill_n(static_cast<float*>(ws.data), bytes / sizeof(float), std::numeric_limits<float>::quiet_NaN());
  }
};

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace cnn::testing
