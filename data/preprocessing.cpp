#include <cnnengine/data/dataset.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include <cnnengine/base/error.hpp>
#include "data/detail/image_codec.hpp"

namespace cnn::data {
namespace {

void check_values(const std::vector<float>& values, int channels, const char* what, bool positive) {
  if (values.size() != 1 && values.size() != static_cast<std::size_t>(channels))
    throw ConfigError(std::string("normalisation: ") + what + " holds " + std::to_string(values.size()) +
                      " values for " + std::to_string(channels) + " channel(s): give 1 or " + std::to_string(channels));
  for (float v : values)
    if (!std::isfinite(v) || (positive && !(v > 0.0f)))
      throw ConfigError(std::string("normalisation: ") + what + " " + std::to_string(v) + " is not " +
                        (positive ? "a positive finite number" : "finite"));
}

float value_for(const std::vector<float>& values, int channel) {
  return values.size() == 1 ? values[0] : values[static_cast<std::size_t>(channel)];
}

}  // namespace

Normalization imagenet_normalization() { return {{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}}; }

void check_normalization(const Normalization& n, int channels) {
  if (n.empty()) return;
  check_values(n.mean, channels, "the mean", false);
  check_values(n.stddev, channels, "the standard deviation", true);
}

void check_framing(SampleShape shape, int resize_shorter_side) {
  if (resize_shorter_side == 0) return;
  const int larger = std::max(shape.height, shape.width);
  if (resize_shorter_side < larger || resize_shorter_side > kMaxResizeShorterSide)
    throw ConfigError("resizing the shorter side to " + std::to_string(resize_shorter_side) + " then cropping " +
                      std::to_string(shape.height) + "x" + std::to_string(shape.width) +
                      " from its centre: the side must be from " + std::to_string(larger) + " (the crop's) to " +
                      std::to_string(kMaxResizeShorterSide) + ", or 0 to stretch the whole image");
}

void normalize(float* sample, SampleShape shape, const Normalization& n) {
  if (n.empty()) return;
  const std::size_t plane = static_cast<std::size_t>(shape.height) * static_cast<std::size_t>(shape.width);
  for (int c = 0; c < shape.channels; ++c) {
    const float mean = value_for(n.mean, c), inverse = 1.0f / value_for(n.stddev, c);
    float* p = sample + static_cast<std::size_t>(c) * plane;
    for (std::size_t i = 0; i < plane; ++i) p[i] = (p[i] - mean) * inverse;
  }
}

Normalization measure_normalization(const Dataset& data) {
  const SampleShape shape = data.shape();
  const std::size_t plane = static_cast<std::size_t>(shape.height) * static_cast<std::size_t>(shape.width);
  std::vector<double> sum(static_cast<std::size_t>(shape.channels)), squares(sum.size());
  std::vector<float> sample(shape.elements());
  for (std::size_t i = 0; i < data.size(); ++i) {
    data.load(i, sample.data());
    for (std::size_t c = 0; c < sum.size(); ++c)
      for (std::size_t k = 0; k < plane; ++k) {
        const double v = sample[c * plane + k];
        sum[c] += v;
        squares[c] += v * v;
      }
  }
  Normalization n;
  const double count = static_cast<double>(data.size()) * static_cast<double>(plane);
  for (std::size_t c = 0; c < sum.size(); ++c) {
    const double mean = count > 0 ? sum[c] / count : 0.0;
    const double variance = count > 0 ? std::max(squares[c] / count - mean * mean, 0.0) : 1.0;
    n.mean.push_back(static_cast<float>(mean));
    n.stddev.push_back(static_cast<float>(std::max(std::sqrt(variance), 1e-6)));  // a flat channel
  }
  return n;
}

bool is_image_file(const std::filesystem::path& file) { return has_image_extension(file); }

std::vector<float> preprocess_image(const std::filesystem::path& file, const Preprocessing& p) {
  check_normalization(p.normalization, p.shape.channels);
  check_framing(p.shape, p.resize_shorter_side);
  std::vector<std::uint8_t> pixels(p.shape.elements());
  decode_image(file, p.shape, pixels.data(), kDefaultMaxDecodedImageBytes, p.resize_shorter_side);
  std::vector<float> sample(pixels.size());
  for (std::size_t i = 0; i < pixels.size(); ++i) sample[i] = static_cast<float>(pixels[i]) * (1.0f / 255.0f);  // as the data sets scale
  normalize(sample.data(), p.shape, p.normalization);
  return sample;
}

}  // namespace cnn::data
