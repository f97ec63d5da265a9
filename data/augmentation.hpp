#pragma once
// The augmentations photos need, as torchvision defines them, drawn from each sample's seeded key
// (the same seed, epoch and sample give the same draws on every machine and thread count): the
// random resized crop, colour jitter and random erasing. A loader applies them
// (LoaderOptions::photo) in torchvision's order: the crop (with the flip), the jitter, the
// normalisation, the erasing.
#include <string>

namespace cnn::data {

// RandomResizedCrop(size, scale, ratio): a window of the image of scale (of its area) and ratio
// (width over height, drawn on a log scale) at random, up to 10 draws, else the centre window of
// the ratio nearest the image's; resized to the loader's sample shape. Taken from the image as the
// file stores it where the data set reads files (Dataset::load_window).
struct RandomResizedCrop {
  bool enabled = false;
  float scale_min = 0.08f, scale_max = 1.0f;
  float ratio_min = 3.0f / 4.0f, ratio_max = 4.0f / 3.0f;
};

// ColorJitter(brightness, contrast, saturation) on values of [0, 1]: each factor drawn from
// [max(0, 1 - x), 1 + x] (0: left out), applied in a random order, each result clamped to [0, 1].
// Brightness scales the image, contrast blends it with the mean of its grey image, saturation with
// its grey image (ITU-R 601-2 luma; a grey image has none).
struct ColorJitter {
  float brightness = 0, contrast = 0, saturation = 0;
  bool enabled() const { return brightness > 0 || contrast > 0 || saturation > 0; }
};

// RandomErasing(p, scale, ratio, value=0): with probability p, a rectangle of scale (of the area)
// and ratio (height over width, on a log scale) set to 0, after normalisation; up to 10 draws,
// none when no draw fits inside the image.
struct RandomErasing {
  float probability = 0;
  float scale_min = 0.02f, scale_max = 0.33f;
  float ratio_min = 0.3f, ratio_max = 3.3f;
};

struct PhotoAugmentation {
  RandomResizedCrop crop;
  ColorJitter jitter;
  RandomErasing erasing;
  bool enabled() const { return crop.enabled || jitter.enabled() || erasing.probability > 0; }
};

// Throws ConfigError naming the field unless every range is finite, ordered and in bounds: scale
// within (0, 1], ratios positive, jitter factors of 0 or more (saturation and contrast), brightness
// and the others at most 1e3, the erasing probability within [0, 1].
void check_photo_augmentation(const PhotoAugmentation& photo);

// "random resized crop (scale 0.08-1, ratio 0.75-1.33), colour jitter 0.4/0.4/0.4, random erasing 0.25",
// or "" when none is on.
std::string describe(const PhotoAugmentation& photo);

}  // namespace cnn::data
