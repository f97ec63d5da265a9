#pragma once
// The draws and the arithmetic of the photo augmentations (data/augmentation.hpp), each on one
// sample with its own generator: torchvision's algorithms, on CHW floats.
#include <cstdint>

#include <cnnengine/data/augmentation.hpp>
#include <cnnengine/data/dataset.hpp>
#include "data/detail/random.hpp"

namespace cnn::data {

// Uniform in [lo, hi).
double uniform(SplitMix64& rng, double lo, double hi);

// RandomResizedCrop.get_params: the window of an image of height x width.
ImageWindow random_resized_crop(SplitMix64& rng, const RandomResizedCrop& crop, int height, int width);

// The window chooser a loader hands the data set: the draws of one sample.
class RandomWindow final : public WindowChooser {
 public:
  RandomWindow(std::uint64_t key, const RandomResizedCrop& crop) : key_(key), crop_(crop) {}
  ImageWindow choose(int height, int width) const override {
    SplitMix64 rng(key_);
    return random_resized_crop(rng, crop_, height, width);
  }

 private:
  std::uint64_t key_;
  const RandomResizedCrop& crop_;
};

// ColorJitter on a sample of values in [0, 1].
void color_jitter(SplitMix64& rng, const ColorJitter& jitter, float* sample, SampleShape shape);

// RandomErasing on a (normalised) sample.
void random_erasing(SplitMix64& rng, const RandomErasing& erasing, float* sample, SampleShape shape);

}  // namespace cnn::data
