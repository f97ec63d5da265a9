// Framing a photo as torchvision does for evaluation (Resize(S) then CenterCrop): where the crop
// lies, that the pixels are the centre's, that training, prediction and masks frame alike, and
// that a framing the crop does not fit is refused.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include <cnnengine/base/error.hpp>
#include <cnnengine/data/dataset.hpp>
#include "data/detail/resize.hpp"
#include "data/image_folder_dataset.hpp"
#include "data/segmentation_dataset.hpp"
#include "data_test_files.hpp"

using namespace cnn::data;
namespace t = cnn::data::test;
using Catch::Matchers::Contains;

namespace {

// A grey image whose pixel at (y, x) is 10 x + y.
std::vector<std::uint8_t> ramp(int width, int height) {
  std::vector<std::uint8_t> pixels;
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) pixels.push_back(static_cast<std::uint8_t>(10 * x + y));
  return pixels;
}

}  // namespace

TEST_CASE("the framing of Resize(S) then CenterCrop: the scaled size and the crop's corner", "[data]") {
  // 300 high, 400 wide, to 256 then 224: 256x341, the crop at (16, round(58.5) = 58, half to even)
  Framing f = frame_image(300, 400, 224, 224, 256);
  CHECK(f.scaled_height == 256);
  CHECK(f.scaled_width == 341);
  CHECK(f.top == 16);
  CHECK(f.left == 58);
  // a tall image: its width is the shorter side
  f = frame_image(500, 250, 224, 224, 256);
  CHECK(f.scaled_width == 256);
  CHECK(f.scaled_height == 512);
  CHECK(f.left == 16);
  CHECK(f.top == 144);
  // no side: stretched
  f = frame_image(300, 400, 28, 32, 0);
  CHECK(f.scaled_height == 28);
  CHECK(f.scaled_width == 32);
  CHECK(f.top == 0);
  CHECK(f.left == 0);
}

TEST_CASE("a framed resize at scale one is the centre of the image, bilinear or nearest", "[data]") {
  const int height = 4, width = 8;
  const std::vector<std::uint8_t> src = ramp(width, height);
  const Framing f = frame_image(height, width, 4, 4, 4);  // the shorter side already 4: the centre 4x4
  REQUIRE(f.left == 2);
  std::vector<std::uint8_t> bilinear(16), nearest(16);
  resize_bilinear_hwc_to_chw(src.data(), height, width, 1, bilinear.data(), 4, 4, f);
  resize_nearest(src.data(), height, width, nearest.data(), 4, 4, f);
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x) {
      CHECK(bilinear[static_cast<std::size_t>(y * 4 + x)] == 10 * (x + 2) + y);
      CHECK(nearest[static_cast<std::size_t>(y * 4 + x)] == 10 * (x + 2) + y);
    }
}

TEST_CASE("a framed downscale reads the centre's pixels, averaged as bilinear averages them", "[data]") {
  // 4x8 to a shorter side of 2: 2x4, its centre 2x2 from columns 2..5 of the source, each output
  // pixel between two source pixels in each direction (scale 2: at 2x + 0.5 + 2 x left).
  const std::vector<std::uint8_t> src = ramp(8, 4);
  std::vector<std::uint8_t> out(4);
  resize_bilinear_hwc_to_chw(src.data(), 4, 8, 1, out.data(), 2, 2, frame_image(4, 8, 2, 2, 2));
  // x = (0 + 1 + 0.5) * 2 - 0.5 = 2.5: between columns 2 and 3; y = 0.5: between rows 0 and 1
  CHECK(out[0] == 26);  // 10 * 2.5 + 0.5, rounded half away from zero: 25.5 -> 26
  CHECK(out[1] == 46);
  CHECK(out[2] == 28);  // y = 2.5
  CHECK(out[3] == 48);
}

TEST_CASE("an image folder framed by its shorter side: the samples, the default size, the record", "[data]") {
  t::TempFolder dir;
  t::write_image(dir / "a" / "wide.png", 8, 4, 1, ramp(8, 4));
  t::write_image(dir / "b" / "tall.png", 4, 8, 1, ramp(4, 8));
  ImageFolderOptions options;
  options.resize_shorter_side = 4;
  const auto data = open_image_folder(dir.path(), SampleShape{1, 0, 0}, options);  // S x S by default
  CHECK(data->shape() == SampleShape{1, 4, 4});
  CHECK(data->resize_shorter_side() == 4);
  CHECK_THAT(data->description(), Contains("resized to 4 on its shorter side"));
  std::vector<float> wide(16), tall(16);
  data->load(0, wide.data());
  data->load(1, tall.data());
  CHECK(wide[0] == Approx(20 / 255.0f));  // column 2, row 0
  CHECK(wide[15] == Approx(53 / 255.0f));  // column 5, row 3
  CHECK(tall[0] == Approx(2 / 255.0f));    // column 0, row 2
  CHECK(tall[15] == Approx(35 / 255.0f));  // column 3, row 5

  // Prediction frames an image as training did, to the bit.
  Preprocessing p{data->shape(), {}, 4};
  CHECK(preprocess_image(dir / "a" / "wide.png", p) == wide);

  // Decoded on load (nothing held), the same samples.
  options.eager_decode_limit = 0;
  const auto lazy = open_image_folder(dir.path(), SampleShape{1, 0, 0}, options);
  std::vector<float> again(16);
  lazy->load(0, again.data());
  CHECK(again == wide);
  // A first-samples part of it keeps the framing a model records.
  CHECK(first_samples(*lazy, 1)->resize_shorter_side() == 4);
}

TEST_CASE("a segmentation's masks are framed as their images", "[data]") {
  t::TempFolder dir;
  const std::vector<std::uint8_t> values = [] {
    std::vector<std::uint8_t> v;
    for (int y = 0; y < 4; ++y)
      for (int x = 0; x < 8; ++x) v.push_back(static_cast<std::uint8_t>(x % 4));  // classes by column
    return v;
  }();
  t::write_image(dir / "images" / "a.png", 8, 4, 1, ramp(8, 4));
  t::write_bytes(dir / "masks" / "a.png", t::grey_png(8, 4, 8, false, values));
  ImageFolderOptions options;
  options.resize_shorter_side = 4;
  const auto data = open_segmentation_folder(dir.path(), SampleShape{1, 4, 4}, {}, options);
  std::vector<std::uint8_t> mask(16);
  data->load_target(0, mask.data());
  for (int x = 0; x < 4; ++x) CHECK(mask[static_cast<std::size_t>(x)] == (x + 2) % 4);  // columns 2 to 5
  CHECK(data->resize_shorter_side() == 4);
}

TEST_CASE("a framing the crop does not fit is refused, naming both sizes", "[data]") {
  CHECK_NOTHROW(check_framing(SampleShape{3, 224, 224}, 0));
  CHECK_NOTHROW(check_framing(SampleShape{3, 224, 224}, 256));
  CHECK_NOTHROW(check_framing(SampleShape{3, 224, 224}, 224));
  CHECK_THROWS_WITH(check_framing(SampleShape{3, 224, 160}, 200), Contains("200") && Contains("224x160"));
  CHECK_THROWS_AS(check_framing(SampleShape{3, 8, 8}, kMaxResizeShorterSide + 1), cnn::ConfigError);
  CHECK_THROWS_AS(check_framing(SampleShape{3, 8, 8}, -1), cnn::ConfigError);

  t::TempFolder dir;
  t::write_image(dir / "a" / "x.png", 8, 4, 1, ramp(8, 4));
  t::write_image(dir / "b" / "y.png", 8, 4, 1, ramp(8, 4));
  ImageFolderOptions options;
  options.resize_shorter_side = 6;
  CHECK_THROWS_AS(open_image_folder(dir.path(), SampleShape{1, 8, 8}, options), cnn::ConfigError);
  Preprocessing p{SampleShape{1, 8, 8}, {}, 6};
  CHECK_THROWS_AS(preprocess_image(dir / "a" / "x.png", p), cnn::ConfigError);
}
