#include "data/detail/augment.hpp"

#include <algorithm>
#include <cstddef>

namespace cnn::data {

AugmentChoice choose_augment(std::uint64_t key, bool flip, int crop_padding) {
  AugmentChoice choice;
  choice.flip = flip && (key & 1);
  if (crop_padding > 0) {
    const std::uint64_t span = 2 * static_cast<std::uint64_t>(crop_padding) + 1;
    choice.shift_y = static_cast<int>((key >> 8) % span) - crop_padding;
    choice.shift_x = static_cast<int>((key >> 36) % span) - crop_padding;
  }
  return choice;
}

void apply_augment(float* sample, SampleShape shape, AugmentChoice choice, float* scratch) {
  const int h = shape.height, w = shape.width;
  const std::size_t plane = static_cast<std::size_t>(h) * w;
  if (choice.flip) {
    for (int c = 0; c < shape.channels; ++c)
      for (int y = 0; y < h; ++y) {
        float* row = sample + c * plane + static_cast<std::size_t>(y) * w;
        std::reverse(row, row + w);
      }
  }
  if (choice.shift_y == 0 && choice.shift_x == 0) return;
  std::copy(sample, sample + shape.elements(), scratch);
  std::fill(sample, sample + shape.elements(), 0.0f);
  // The rows and columns of the output that land inside the source image.
  const int y0 = std::max(0, -choice.shift_y), y1 = std::min(h, h - choice.shift_y);
  const int x0 = std::max(0, -choice.shift_x), x1 = std::min(w, w - choice.shift_x);
  if (y0 >= y1 || x0 >= x1) return;
  for (int c = 0; c < shape.channels; ++c)
    for (int y = y0; y < y1; ++y) {
      const float* src = scratch + c * plane + static_cast<std::size_t>(y + choice.shift_y) * w + choice.shift_x;
      float* dst = sample + c * plane + static_cast<std::size_t>(y) * w;
      std::copy(src + x0, src + x1, dst + x0);
    }
}

}  // namespace cnn::data
