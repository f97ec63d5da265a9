// input_check: what the trainer's check of a batch's pixels (no NaN, no infinity) costs before
// each step. Times first_non_finite (base/detail/finite) against a plain element-by-element
// std::isfinite loop over a batch of 256 images of 3 x 224 x 224 (38.5 M floats), best of 5.
//
//   input_check [IMAGES CHANNELS SIZE]      default: 256 3 224
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "base/detail/finite.hpp"

namespace {

using Clock = std::chrono::steady_clock;

template <class Check>
double best_ms(Check check) {
  double best = 1e30;
  for (int round = 0; round < 5; ++round) {
    const auto start = Clock::now();
    check();
    best = std::min(best, std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  return best;
}

std::size_t first_non_finite_plainly(const float* values, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    if (!std::isfinite(values[i])) return i;
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t images = argc > 3 ? std::strtoul(argv[1], nullptr, 10) : 256;
  const std::size_t channels = argc > 3 ? std::strtoul(argv[2], nullptr, 10) : 3;
  const std::size_t size = argc > 3 ? std::strtoul(argv[3], nullptr, 10) : 224;
  const std::vector<float> batch(images * channels * size * size, 0.5f);
  std::size_t found = 0;
  const double blocks = best_ms([&] { found += cnn::first_non_finite(batch.data(), batch.size()); });
  const double plain = best_ms([&] { found += first_non_finite_plainly(batch.data(), batch.size()); });
  std::printf("%zu images of %zu x %zu x %zu (%.1f M floats): first_non_finite %.3f ms, element by element %.3f ms\n",
              images, channels, size, size, static_cast<double>(batch.size()) / 1e6, blocks, plain);
  return found == 10 * batch.size() ? 0 : 1;  // every check ran over the whole batch and found nothing
}
