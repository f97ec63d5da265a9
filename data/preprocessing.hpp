#pragma once
// What an image goes through before a network sees it: converted to a channel count, resized,
// scaled to [0, 1] and normalised per channel. A saved model records it, so that the images it
// is given later go through the same (train_images --predict, an application's inference).
#include <filesystem>
#include <vector>

#include "data/dataset.hpp"

namespace cnn::data {

// x' = (x - mean[c]) / stddev[c] for channel c: one value each for every channel, or one per
// channel; none (empty) leaves the values as they are.
struct Normalization {
  std::vector<float> mean;
  std::vector<float> stddev;
  bool empty() const { return mean.empty() && stddev.empty(); }
};

struct Preprocessing {
  SampleShape shape;           // channels, height and width an image is brought to
  Normalization normalization;
};

// Throws ConfigError unless mean and stddev each hold 1 or `channels` finite values (stddev
// positive), or are both empty.
void check_normalization(const Normalization& n, int channels);
// Normalises one CHW sample in place.
void normalize(float* sample, SampleShape shape, const Normalization& n);
// Each channel's mean and standard deviation over every pixel of every sample of `data` (as
// load() gives them: scaled to [0, 1]), in one pass, in double precision.
Normalization measure_normalization(const Dataset& data);

// Whether the file name is one of an image the engine reads: .png, .jpg, .jpeg, .bmp, any case.
bool is_image_file(const std::filesystem::path& file);

// An image file as a network takes it: decoded (and checked: DataError naming the file),
// converted to p.shape.channels, resized to p.shape, scaled to [0, 1] and normalised.
std::vector<float> preprocess_image(const std::filesystem::path& file, const Preprocessing& p);

}  // namespace cnn::data
