#include "engine/plan/detail/largest_fitting.hpp"

#include <algorithm>
#include <cstddef>

#include <cnnengine/engine/core/backend.hpp>
#include <cnnengine/engine/core/network.hpp>

namespace cnn {

int largest_describable_micro_batch(const Network& net, const Backend& backend, int most) {
  std::size_t sample = 1;
  for (int id = 0; id < net.size(); ++id) sample = std::max(sample, net.node(id).shape.elements());
  const std::size_t samples = backend.largest_tensor_elements() / sample;
  return samples < static_cast<std::size_t>(most) ? static_cast<int>(samples) : most;
}

int largest_fitting_micro_batch(int smallest, int limit, const std::function<bool(int)>& fits) {
  if (limit < smallest || !fits(smallest)) return 0;
  int lo = smallest, hi = limit;
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    if (fits(mid)) lo = mid;
    else hi = mid - 1;
  }
  // The window moves up with each one found.
  constexpr int kLookAbove = 8;
  for (int b = lo + 1; b <= limit && b <= lo + kLookAbove; ++b)
    if (fits(b)) lo = b;
  return lo;
}

}  // namespace cnn
