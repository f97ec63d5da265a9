#pragma once
// The tests' one measure of how far two float vectors are apart: the largest absolute difference
// over the largest magnitude of the expected values (the max-norm relative error). An element-wise
// ratio would be dominated by elements near zero, whose fp32 rounding error is set by their
// neighbours' magnitude, not their own.
#include <algorithm>
#include <cmath>
#include <vector>

namespace cnn::testing {

inline double relative_error(const std::vector<float>& got, const std::vector<float>& expected) {
  if (got.size() != expected.size()) return INFINITY;
  double worst = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double diff = std::abs(static_cast<double>(got[i]) - expected[i]);
    if (std::isnan(diff)) return INFINITY;
    worst = std::max(worst, diff);
    scale = std::max(scale, std::abs(static_cast<double>(expected[i])));
  }
  return worst / std::max(scale, 1e-30);
}

}  // namespace cnn::testing
