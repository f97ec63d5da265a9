#include "data/detail/augment.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>

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

namespace {

// Flips and shifts each of `planes` planes of h x w values, the rows and columns shifted in set
// to `outside`.
template <typename T>
void flip_and_shift(T* data, int planes, int h, int w, AugmentChoice choice, T* scratch, T outside) {
  const std::size_t plane = static_cast<std::size_t>(h) * static_cast<std::size_t>(w);
  const std::size_t total = plane * static_cast<std::size_t>(planes);
  if (choice.flip) {
    for (int c = 0; c < planes; ++c)
      for (int y = 0; y < h; ++y) {
        T* row = data + c * plane + static_cast<std::size_t>(y) * w;
        std::reverse(row, row + w);
      }
  }
  if (choice.shift_y == 0 && choice.shift_x == 0) return;
  std::copy(data, data + total, scratch);
  std::fill(data, data + total, outside);
  // The rows and columns of the output that land inside the source image.
  const int y0 = std::max(0, -choice.shift_y), y1 = std::min(h, h - choice.shift_y);
  const int x0 = std::max(0, -choice.shift_x), x1 = std::min(w, w - choice.shift_x);
  if (y0 >= y1 || x0 >= x1) return;
  for (int c = 0; c < planes; ++c)
    for (int y = y0; y < y1; ++y) {
      const T* src = scratch + c * plane + static_cast<std::size_t>(y + choice.shift_y) * w + choice.shift_x;
      T* dst = data + c * plane + static_cast<std::size_t>(y) * w;
      std::copy(src + x0, src + x1, dst + x0);
    }
}

}  // namespace

void apply_augment(float* sample, SampleShape shape, AugmentChoice choice, float* scratch) {
  flip_and_shift(sample, shape.channels, shape.height, shape.width, choice, scratch, 0.0f);
}

void apply_augment_mask(std::uint8_t* mask, int height, int width, AugmentChoice choice, std::uint8_t* scratch) {
  flip_and_shift(mask, 1, height, width, choice, scratch, kIgnoreMask);
}

}  // namespace cnn::data
