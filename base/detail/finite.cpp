#include "base/detail/finite.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace cnn {

std::size_t first_non_finite(const float* values, std::size_t n) {
  constexpr std::size_t kBlock = 4096;
  constexpr std::uint32_t kExponent = 0x7f800000u;
  for (std::size_t begin = 0; begin < n; begin += kBlock) {
    const std::size_t end = std::min(n, begin + kBlock);
    std::uint32_t found = 0;
    for (std::size_t i = begin; i < end; ++i) {
      std::uint32_t bits;
      std::memcpy(&bits, values + i, sizeof bits);
      found |= static_cast<std::uint32_t>((bits & kExponent) == kExponent);
    }
    if (found)
      for (std::size_t i = begin; i < end; ++i)
        if (!std::isfinite(values[i])) return i;
  }
  return n;
}

}  // namespace cnn
