#pragma once
// What an image goes through before a network sees it: converted to a channel count, resized,
// scaled to [0, 1] and normalised per channel. A saved model records it, so that the images it
// is given later go through the same (train_images --predict, an application's inference).
#include <vector>

#include "cnnengine/data/dataset.hpp"

namespace cnn::data {

struct Preprocessing {
  SampleShape shape;          // channels, height and width an image is brought to
  std::vector<float> mean;    // per channel, subtracted after scaling to [0, 1]; empty: none
  std::vector<float> stddev;  // per channel, divided by after the mean; empty: none
};

}  // namespace cnn::data
