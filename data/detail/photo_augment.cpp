#include "data/detail/photo_augment.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>

namespace cnn::data {

double uniform(SplitMix64& rng, double lo, double hi) {
  const double unit = static_cast<double>(rng.next() >> 11) * 0x1.0p-53;  // [0, 1), 53 bits
  return lo + (hi - lo) * unit;
}

namespace {

int rounded(double v) { return static_cast<int>(std::nearbyint(v)); }  // half to even, as Python's round

// torch.randint(0, n + 1): in [0, n].
int up_to(SplitMix64& rng, int n) { return static_cast<int>(rng.below(static_cast<std::uint64_t>(n) + 1)); }

}  // namespace

ImageWindow random_resized_crop(SplitMix64& rng, const RandomResizedCrop& crop, int height, int width) {
  const double area = static_cast<double>(height) * width;
  const double log_lo = std::log(crop.ratio_min), log_hi = std::log(crop.ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * uniform(rng, crop.scale_min, crop.scale_max);
    const double aspect = std::exp(uniform(rng, log_lo, log_hi));
    const int w = rounded(std::sqrt(target_area * aspect)), h = rounded(std::sqrt(target_area / aspect));
    if (0 < w && w <= width && 0 < h && h <= height) {
      const int top = up_to(rng, height - h), left = up_to(rng, width - w);
      return {top, left, h, w};
    }
  }
  // The centre window of the ratio nearest the image's.
  const double ratio = static_cast<double>(width) / height;
  int w = width, h = height;
  if (ratio < crop.ratio_min) {
    h = std::clamp(rounded(w / static_cast<double>(crop.ratio_min)), 1, height);
  } else if (ratio > crop.ratio_max) {
    w = std::clamp(rounded(h * static_cast<double>(crop.ratio_max)), 1, width);
  }
  return {(height - h) / 2, (width - w) / 2, h, w};
}

namespace {

// torchvision's _blend: ratio x image + (1 - ratio) x other, clamped to [0, 1].
float blend(float image, float other, float ratio) {
  return std::clamp(ratio * image + (1 - ratio) * other, 0.0f, 1.0f);
}

// rgb_to_grayscale's weights (ITU-R 601-2).
float grey(float r, float g, float b) { return 0.2989f * r + 0.587f * g + 0.114f * b; }

void brightness(float* sample, std::size_t n, float factor) {
  for (std::size_t i = 0; i < n; ++i) sample[i] = blend(sample[i], 0.0f, factor);
}

void contrast(float* sample, SampleShape shape, float factor) {
  const std::size_t plane = static_cast<std::size_t>(shape.height) * static_cast<std::size_t>(shape.width);
  double sum = 0;
  if (shape.channels == 3) {
    for (std::size_t p = 0; p < plane; ++p) sum += grey(sample[p], sample[plane + p], sample[2 * plane + p]);
  } else {
    for (std::size_t p = 0; p < plane; ++p) sum += sample[p];
  }
  const auto mean = static_cast<float>(sum / static_cast<double>(plane));
  for (std::size_t i = 0; i < shape.elements(); ++i) sample[i] = blend(sample[i], mean, factor);
}

void saturation(float* sample, SampleShape shape, float factor) {
  if (shape.channels != 3) return;  // a grey image has no saturation
  const std::size_t plane = static_cast<std::size_t>(shape.height) * static_cast<std::size_t>(shape.width);
  float* r = sample;
  float* g = sample + plane;
  float* b = sample + 2 * plane;
  for (std::size_t p = 0; p < plane; ++p) {
    const float y = grey(r[p], g[p], b[p]);
    r[p] = blend(r[p], y, factor);
    g[p] = blend(g[p], y, factor);
    b[p] = blend(b[p], y, factor);
  }
}

}  // namespace

void color_jitter(SplitMix64& rng, const ColorJitter& jitter, float* sample, SampleShape shape) {
  std::array<int, 3> order{0, 1, 2};
  for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  const std::array<float, 3> amounts{jitter.brightness, jitter.contrast, jitter.saturation};
  std::array<float, 3> factors{};
  for (std::size_t k = 0; k < 3; ++k)
    factors[k] = static_cast<float>(uniform(rng, std::max(0.0f, 1 - amounts[k]), 1 + amounts[k]));
  for (const int k : order) {
    if (amounts[static_cast<std::size_t>(k)] <= 0) continue;
    const float f = factors[static_cast<std::size_t>(k)];
    if (k == 0) brightness(sample, shape.elements(), f);
    else if (k == 1) contrast(sample, shape, f);
    else saturation(sample, shape, f);
  }
}

void random_erasing(SplitMix64& rng, const RandomErasing& erasing, float* sample, SampleShape shape) {
  if (uniform(rng, 0, 1) >= erasing.probability) return;
  const double area = static_cast<double>(shape.height) * shape.width;
  const double log_lo = std::log(erasing.ratio_min), log_hi = std::log(erasing.ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double erase_area = area * uniform(rng, erasing.scale_min, erasing.scale_max);
    const double aspect = std::exp(uniform(rng, log_lo, log_hi));
    const int h = rounded(std::sqrt(erase_area * aspect)), w = rounded(std::sqrt(erase_area / aspect));
    if (!(h < shape.height && w < shape.width)) continue;
    const int top = up_to(rng, shape.height - h), left = up_to(rng, shape.width - w);
    const std::size_t plane = static_cast<std::size_t>(shape.height) * static_cast<std::size_t>(shape.width);
    for (int c = 0; c < shape.channels; ++c)
      for (int y = top; y < top + h; ++y) {
        float* row = sample + c * plane + static_cast<std::size_t>(y) * static_cast<std::size_t>(shape.width);
        std::fill(row + left, row + left + w, 0.0f);
      }
    return;
  }
}

}  // namespace cnn::data
