// What an image goes through before a network sees it: the same for training and for
// prediction, per-channel normalisation measured from the data or given.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include <cnnengine/base/error.hpp>
#include <cnnengine/data/dataset.hpp>
#include "data/image_folder_dataset.hpp"
#include "data_test_files.hpp"

using namespace cnn::data;
namespace t = cnn::data::test;

TEST_CASE("an image preprocessed for prediction is the sample training loads, normalised alike", "[data]") {
  t::TempFolder dir;
  const std::vector<std::uint8_t> pixels = t::flat_pixels(6, 4, {10, 200, 90});
  t::write_image(dir / "a" / "x.png", 6, 4, 3, pixels);
  t::write_image(dir / "b" / "y.png", 6, 4, 3, t::flat_pixels(6, 4, {0, 0, 0}));
  const SampleShape shape{3, 8, 5};  // another size: both resize the same way
  const auto data = open_image_folder(dir.path(), shape);
  std::vector<float> loaded(shape.elements());
  data->load(0, loaded.data());

  Preprocessing p{shape, {{0.5f}, {0.25f}}};
  const std::vector<float> predicted = preprocess_image(dir / "a" / "x.png", p);
  normalize(loaded.data(), shape, p.normalization);
  CHECK(predicted == loaded);  // to the bit

  p.normalization = {{0.1f, 0.2f, 0.3f}, {1.0f, 2.0f, 4.0f}};
  const std::vector<float> per_channel = preprocess_image(dir / "a" / "x.png", p);
  CHECK(per_channel[0] == Approx((10.0f / 255.0f - 0.1f) / 1.0f));
  CHECK(per_channel[40] == Approx((200.0f / 255.0f - 0.2f) / 2.0f));
  CHECK(per_channel[80] == Approx((90.0f / 255.0f - 0.3f) / 4.0f));
}

TEST_CASE("a data set's mean and standard deviation per channel", "[data]") {
  t::TempFolder dir;
  t::write_image(dir / "a" / "x.png", 2, 2, 3, t::flat_pixels(2, 2, {0, 255, 51}));
  t::write_image(dir / "b" / "y.png", 2, 2, 3, t::flat_pixels(2, 2, {255, 255, 153}));
  const Normalization n = measure_normalization(*open_image_folder(dir.path(), SampleShape{0, 0, 0}));  // as the images are
  REQUIRE(n.mean.size() == 3);
  CHECK(n.mean[0] == Approx(0.5f));
  CHECK(n.stddev[0] == Approx(0.5f));
  CHECK(n.mean[1] == Approx(1.0f));
  CHECK(n.stddev[1] == Approx(1e-6f).margin(1e-6));  // a flat channel: kept positive
  CHECK(n.mean[2] == Approx(0.4f));
  CHECK(n.stddev[2] == Approx(0.2f));
}

TEST_CASE("a normalisation that does not fit the channels is refused by name", "[data]") {
  CHECK_NOTHROW(check_normalization({}, 3));
  CHECK_NOTHROW(check_normalization({{0.5f}, {0.5f}}, 3));
  CHECK_THROWS_WITH(check_normalization({{0.5f, 0.5f}, {0.5f}}, 3), Catch::Contains("2 values for 3 channel"));
  CHECK_THROWS_WITH(check_normalization({{0.5f}, {0.0f}}, 1), Catch::Contains("positive"));
  CHECK_THROWS_AS(check_normalization({{0.5f}, {}}, 1), cnn::ConfigError);
}
