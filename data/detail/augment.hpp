#pragma once
// Per-sample augmentation of a CHW float image, in place, and of its segmentation mask with the
// same choices. Each sample's choices come from one 64-bit key (a hash of seed, epoch and sample
// index), so a replay draws the same ones.
#include <cstdint>

#include <cnnengine/data/dataset.hpp>

namespace cnn::data {

struct AugmentChoice {
  bool flip = false;
  int shift_y = 0, shift_x = 0;  // crop offset into the zero-padded image minus the padding
};

AugmentChoice choose_augment(std::uint64_t key, bool flip, int crop_padding);

// Mirrors left-right if choice.flip, then takes the crop: out(y, x) = in(y + shift_y, x + shift_x),
// 0 outside the image. scratch holds shape.elements() floats.
void apply_augment(float* sample, SampleShape shape, AugmentChoice choice, float* scratch);

// The same on a height x width mask, a byte a pixel: it moves with its image, and the crop's
// padding is kIgnoreMask, no class. scratch holds height x width bytes.
void apply_augment_mask(std::uint8_t* mask, int height, int width, AugmentChoice choice, std::uint8_t* scratch);

}  // namespace cnn::data
