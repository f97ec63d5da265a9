// The photo augmentations as torchvision defines them: the random resized crop's windows, colour
// jitter's arithmetic, random erasing's rectangle; and their options' checks.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include <cnnengine/base/error.hpp>
#include <cnnengine/data/augmentation.hpp>
#include "data/detail/photo_augment.hpp"
#include "data/detail/random.hpp"

using namespace cnn::data;

TEST_CASE("random resized crop: windows inside the image, of the scale and ratio asked", "[data][photo]") {
  RandomResizedCrop crop;
  crop.enabled = true;
  int drawn = 0;
  for (std::uint64_t key = 0; key < 2000; ++key) {
    SplitMix64 rng(key);
    const int height = 200 + static_cast<int>(key % 97), width = 150 + static_cast<int>(key % 131);
    const ImageWindow w = random_resized_crop(rng, crop, height, width);
    REQUIRE(w.height >= 1);
    REQUIRE(w.width >= 1);
    REQUIRE(w.top >= 0);
    REQUIRE(w.left >= 0);
    REQUIRE(w.top + w.height <= height);
    REQUIRE(w.left + w.width <= width);
    const double share = static_cast<double>(w.height) * w.width / (static_cast<double>(height) * width);
    const double ratio = static_cast<double>(w.width) / w.height;
    // Rounding each side to a pixel moves the share and ratio a little past their ranges.
    CHECK(share > 0.07);
    CHECK(share < 1.02);
    CHECK(ratio > 0.73);
    CHECK(ratio < 1.37);
    drawn += share < 0.5;
  }
  CHECK(drawn > 800);  // uniform in area: about 45% of draws below half the image
}

TEST_CASE("random resized crop: where no draw fits, the centre window of the nearest ratio", "[data][photo]") {
  RandomResizedCrop crop;
  crop.enabled = true;
  crop.scale_min = crop.scale_max = 1.0f;  // the whole area: fits only at the image's own ratio
  SplitMix64 rng(7);
  // A strip 10 high, 100 wide (ratio 10, above 4/3): the height kept, the width round(10 x 4/3).
  const ImageWindow wide = random_resized_crop(rng, crop, 10, 100);
  CHECK(wide.height == 10);
  CHECK(wide.width == 13);
  CHECK(wide.top == 0);
  CHECK(wide.left == (100 - 13) / 2);
  // A column 100 high, 10 wide: the width kept, the height round(10 / (3/4)).
  const ImageWindow tall = random_resized_crop(rng, crop, 100, 10);
  CHECK(tall.width == 10);
  CHECK(tall.height == 13);
  CHECK(tall.top == (100 - 13) / 2);
  // One pixel: the pixel.
  const ImageWindow one = random_resized_crop(rng, crop, 1, 1);
  CHECK(one.height == 1);
  CHECK(one.width == 1);
}

TEST_CASE("colour jitter: brightness scales, saturation leaves grey alone, each clamped to [0, 1]", "[data][photo]") {
  const SampleShape shape{3, 4, 4};
  std::vector<float> image(shape.elements());
  for (std::size_t i = 0; i < image.size(); ++i) image[i] = static_cast<float>(i % 7) / 10.0f;
  SECTION("brightness alone: every value times one factor of [0.5, 1.5]") {
    for (std::uint64_t key = 0; key < 50; ++key) {
      std::vector<float> out = image;
      SplitMix64 rng(key);
      color_jitter(rng, {0.5f, 0, 0}, out.data(), shape);
      float factor = -1;
      for (std::size_t i = 0; i < out.size(); ++i) {
        if (image[i] == 0) {
          CHECK(out[i] == 0);
          continue;
        }
        const float f = out[i] / image[i];
        if (factor < 0) factor = f;
        if (out[i] < 1) CHECK(f == Approx(factor).epsilon(1e-5));
      }
      CHECK(factor >= 0.5f);
      CHECK(factor <= 1.5f);
    }
  }
  SECTION("saturation on a grey image changes nothing; contrast keeps its mean where nothing clamps") {
    const SampleShape grey{1, 4, 4};
    std::vector<float> plane(image.begin(), image.begin() + 16), out = plane;
    SplitMix64 rng(3);
    color_jitter(rng, {0, 0, 0.9f}, out.data(), grey);
    CHECK(out == plane);
    SplitMix64 rng2(4);
    color_jitter(rng2, {0, 0.3f, 0}, out.data(), grey);
    const double before = std::accumulate(plane.begin(), plane.end(), 0.0);
    const double after = std::accumulate(out.begin(), out.end(), 0.0);
    CHECK(after == Approx(before).epsilon(1e-5));
  }
  SECTION("saturation 0 (factor drawn from [0, 2]) of a colour pixel blends toward its grey") {
    std::vector<float> out = image;
    SplitMix64 rng(11);
    color_jitter(rng, {0, 0, 1.0f}, out.data(), shape);
    for (float v : out) {
      CHECK(v >= 0);
      CHECK(v <= 1);
    }
  }
}

TEST_CASE("random erasing: one rectangle of zeros of the scale asked, or nothing", "[data][photo]") {
  const SampleShape shape{3, 32, 32};
  RandomErasing erasing;
  erasing.probability = 1;
  for (std::uint64_t key = 0; key < 100; ++key) {
    std::vector<float> image(shape.elements(), 1.0f);
    SplitMix64 rng(key);
    random_erasing(rng, erasing, image.data(), shape);
    const auto zeros = static_cast<std::size_t>(std::count(image.begin(), image.end(), 0.0f));
    CHECK(zeros % 3 == 0);  // every channel alike
    const double share = static_cast<double>(zeros / 3) / (32.0 * 32.0);
    CHECK(share < 0.36);
    // The zeros of channel 0 form one rectangle: their rows' extents times their columns'.
    int top = 32, bottom = -1, left = 32, right = -1;
    for (int y = 0; y < 32; ++y)
      for (int x = 0; x < 32; ++x)
        if (image[static_cast<std::size_t>(y * 32 + x)] == 0) {
          top = std::min(top, y), bottom = std::max(bottom, y), left = std::min(left, x), right = std::max(right, x);
        }
    if (zeros > 0) CHECK(static_cast<std::size_t>((bottom - top + 1) * (right - left + 1)) * 3 == zeros);
  }
  erasing.probability = 0;
  std::vector<float> image(shape.elements(), 1.0f);
  SplitMix64 rng(1);
  random_erasing(rng, erasing, image.data(), shape);
  CHECK(std::count(image.begin(), image.end(), 0.0f) == 0);
}

TEST_CASE("photo augmentation: ranges out of order or out of bounds are refused by name", "[data][photo]") {
  PhotoAugmentation photo;
  CHECK_NOTHROW(check_photo_augmentation(photo));
  auto refused = [](const PhotoAugmentation& p, const std::string& word) {
    try {
      check_photo_augmentation(p);
    } catch (const cnn::ConfigError& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(word) != std::string::npos);
      return;
    }
    FAIL("expected a ConfigError naming " << word);
  };
  PhotoAugmentation p = photo;
  p.crop.scale_min = 0;
  refused(p, "crop scale");
  p = photo;
  p.crop.scale_min = 0.9f, p.crop.scale_max = 0.5f;
  refused(p, "crop scale");
  p = photo;
  p.crop.ratio_max = NAN;
  refused(p, "crop ratio");
  p = photo;
  p.jitter.brightness = -1;
  refused(p, "brightness");
  p = photo;
  p.erasing.probability = 1.5f;
  refused(p, "erasing probability");
  p = photo;
  p.erasing.scale_max = 2;
  refused(p, "erasing scale");
}
