#include <catch2/catch.hpp>
#include <cstdint>
#include <sys/stat.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <cnnengine/base/error.hpp>
#include "data/data_error.hpp"
#include "data/image_folder_dataset.hpp"
#include "data_test_files.hpp"

using namespace cnn::data;
using cnn::data::test::TempFolder;
namespace t = cnn::data::test;
namespace fs = std::filesystem;

namespace {

void expect_error(const fs::path& folder, const fs::path& named, const std::string& words, SampleShape target = {}) {
  try {
    open_image_folder(folder, target);
    FAIL("expected a DataError naming " << named);
  } catch (const DataError& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find(full_path(named)) != std::string::npos);
    CHECK(what.find(words) != std::string::npos);
  }
}

std::vector<float> load(const Dataset& data, std::size_t index, int* label = nullptr) {
  std::vector<float> out(data.shape().elements());
  int l = data.load(index, out.data());
  if (label) *label = l;
  return out;
}

// Two classes, "a" and "b", of flat images of the given extension and channel count.
void write_two_classes(const fs::path& root, const std::string& ext, int channels) {
  std::vector<std::uint8_t> a = channels == 1 ? std::vector<std::uint8_t>{40} : std::vector<std::uint8_t>{200, 100, 50};
  std::vector<std::uint8_t> b = channels == 1 ? std::vector<std::uint8_t>{220} : std::vector<std::uint8_t>{10, 20, 250};
  t::write_image(root / "a" / ("1" + ext), 6, 4, channels, t::flat_pixels(6, 4, a));
  t::write_image(root / "a" / ("2" + ext), 6, 4, channels, t::flat_pixels(6, 4, a));
  t::write_image(root / "b" / ("1" + ext), 6, 4, channels, t::flat_pixels(6, 4, b));
}

}  // namespace

TEST_CASE("image folder: PNG, BMP and JPEG, grey and RGB, round trip", "[data][image]") {
  const std::string ext = GENERATE(std::string(".png"), std::string(".bmp"), std::string(".jpg"));
  const int channels = GENERATE(1, 3);
  const float tolerance = ext == ".jpg" ? 3.5f / 255 : 1e-6f;
  INFO(ext << " with " << channels << " channels");
  TempFolder dir;
  write_two_classes(dir.path(), ext, channels);
  auto data = open_image_folder(dir.path(), SampleShape{channels, 0, 0});
  REQUIRE(data->size() == 3);
  CHECK(data->shape() == SampleShape{channels, 4, 6});
  CHECK(data->num_classes() == 2);
  CHECK(data->class_names() == std::vector<std::string>{"a", "b"});
  int label = -1;
  std::vector<float> first = load(*data, 0, &label);
  CHECK(label == 0);
  std::vector<float> last = load(*data, 2, &label);
  CHECK(label == 1);
  const std::vector<float> a = channels == 1 ? std::vector<float>{40} : std::vector<float>{200, 100, 50};
  const std::vector<float> b = channels == 1 ? std::vector<float>{220} : std::vector<float>{10, 20, 250};
  for (int c = 0; c < channels; ++c)
    for (int p = 0; p < 24; ++p) {  // CHW: plane c holds channel c
      CHECK(std::abs(first[c * 24 + p] - a[c] / 255) <= tolerance);
      CHECK(std::abs(last[c * 24 + p] - b[c] / 255) <= tolerance);
    }
}

TEST_CASE("image folder: channel conversion", "[data][image]") {
  TempFolder dir;
  t::write_image(dir / "rgb" / "x.png", 2, 2, 3, t::flat_pixels(2, 2, {200, 100, 50}));
  t::write_image(dir / "grey" / "x.png", 2, 2, 1, t::flat_pixels(2, 2, {90}));
  SECTION("RGB to grey uses stb's luma weights") {
    auto data = open_image_folder(dir.path(), SampleShape{1, 0, 0});
    CHECK(load(*data, 1)[0] * 255 == Approx((200 * 77 + 100 * 150 + 50 * 29) >> 8));
  }
  SECTION("grey to RGB repeats the value") {
    auto data = open_image_folder(dir.path(), SampleShape{3, 0, 0});
    for (float v : load(*data, 0)) CHECK(v * 255 == Approx(90));
  }
  SECTION("other channel counts are refused") {
    expect_error(dir.path(), dir.path(), "expected 1 or 3", SampleShape{4, 0, 0});
  }
  SECTION("0 channels: as the first image is (here the grey class's, sorted first)") {
    CHECK(open_image_folder(dir.path(), SampleShape{0, 0, 0})->shape().channels == 1);
  }
}

TEST_CASE("image folder: colour images stay colour when no channel count is asked", "[data][image]") {
  TempFolder dir;
  t::write_image(dir / "a" / "x.png", 2, 2, 3, t::flat_pixels(2, 2, {200, 100, 50}));
  t::write_image(dir / "b" / "x.png", 2, 2, 3, t::flat_pixels(2, 2, {10, 20, 30}));
  auto data = open_image_folder(dir.path(), SampleShape{0, 0, 0});
  CHECK(data->shape().channels == 3);
  CHECK(load(*data, 0)[0] * 255 == Approx(200));
}

TEST_CASE("image folder: bilinear resize", "[data][image]") {
  TempFolder dir;
  t::write_image(dir / "a" / "ramp.png", 2, 1, 1, {0, 255});
  t::write_image(dir / "b" / "flat.bmp", 9, 7, 3, t::flat_pixels(9, 7, {30, 60, 90}));
  auto data = open_image_folder(dir.path(), SampleShape{1, 2, 4});
  CHECK(data->shape() == SampleShape{1, 2, 4});
  std::vector<float> ramp = load(*data, 0);
  const std::vector<float> row = {0, 64, 191, 255};  // centres at -0.25, 0.25, 0.75, 1.25
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 4; ++x) CHECK(ramp[y * 4 + x] * 255 == Approx(row[x]));
  const float luma = (30 * 77 + 60 * 150 + 90 * 29) >> 8;
  for (float v : load(*data, 1)) CHECK(v * 255 == Approx(luma));

  SECTION("height alone means a square") {
    auto square = open_image_folder(dir.path(), SampleShape{3, 5, 0});
    CHECK(square->shape() == SampleShape{3, 5, 5});
  }
  SECTION("no size means the first image's") {
    auto first = open_image_folder(dir.path(), SampleShape{3, 0, 0});
    CHECK(first->shape() == SampleShape{3, 1, 2});
  }
}

TEST_CASE("image folder: decoding on load gives the same samples", "[data][image]") {
  TempFolder dir;
  write_two_classes(dir.path(), ".png", 3);
  auto eager = open_image_folder(dir.path(), SampleShape{3, 3, 5});
  auto lazy = open_image_folder(dir.path(), SampleShape{3, 3, 5}, 0);
  CHECK(lazy->description().find("decoded on load") != std::string::npos);
  CHECK(lazy->host_bytes() < eager->host_bytes());
  for (std::size_t i = 0; i < 3; ++i) CHECK(load(*eager, i) == load(*lazy, i));
}

TEST_CASE("image folder: hidden files and stray non-images beside class folders are skipped", "[data][image]") {
  TempFolder dir;
  write_two_classes(dir.path(), ".png", 1);
  t::write_bytes(dir / "a" / ".DS_Store", {1, 2, 3});
  t::write_bytes(dir / "README.txt", {'h', 'i'});
  fs::create_directories(dir / ".cache" / "x");
  auto data = open_image_folder(dir.path(), {});
  CHECK(data->size() == 3);
  CHECK(data->num_classes() == 2);
}

TEST_CASE("image folder: every bad input is a DataError naming the file", "[data][image]") {
  TempFolder dir;
  write_two_classes(dir.path(), ".png", 1);

  SECTION("corrupt PNG: valid header, truncated data") {
    std::vector<std::uint8_t> noise(32 * 32);
    for (std::size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<std::uint8_t>(i * 7919 % 251);
    t::write_image(dir / "b" / "broken.png", 32, 32, 1, noise);
    const std::vector<std::uint8_t> whole = t::read_bytes(dir / "b" / "broken.png");
    std::vector<std::uint8_t> bytes = whole;
    bytes.resize(bytes.size() * 2 / 3);
    t::write_bytes(dir / "b" / "broken.png", bytes);
    expect_error(dir.path(), dir / "b" / "broken.png", "corrupt image");
    SECTION("also when decoding on load: checked at open, and on load") {
      CHECK_THROWS_AS(open_image_folder(dir.path(), SampleShape{1, 4, 4}, 0), DataError);
      t::write_bytes(dir / "b" / "broken.png", whole);
      auto data = open_image_folder(dir.path(), SampleShape{1, 4, 4}, 0);
      t::write_bytes(dir / "b" / "broken.png", bytes);
      std::vector<float> out(16);
      try {
        data->load(3, out.data());
        FAIL("expected a DataError");
      } catch (const DataError& e) {
        CHECK(std::string(e.what()).find(full_path(dir / "b" / "broken.png")) != std::string::npos);
      }
    }
  }
  SECTION("truncated BMP and JPEG (stb_image alone would read zeros past the end)") {
    for (const char* ext : {".bmp", ".jpg"}) {
      std::vector<std::uint8_t> noise(32 * 32);
      for (std::size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<std::uint8_t>(i * 7919 % 251);
      const fs::path file = dir / "b" / (std::string("cut") + ext);
      t::write_image(file, 32, 32, 1, noise);
      std::vector<std::uint8_t> bytes = t::read_bytes(file);
      bytes.resize(bytes.size() * 2 / 3);
      t::write_bytes(file, bytes);
      expect_error(dir.path(), file, "truncated");
      fs::remove(file);
    }
  }
  SECTION("garbage with an image extension") {
    t::write_bytes(dir / "a" / "fake.jpg", {'n', 'o', 't', ' ', 'a', 'n', ' ', 'i', 'm', 'a', 'g', 'e'});
    expect_error(dir.path(), dir / "a" / "fake.jpg", "not a readable PNG, JPEG or BMP image");
  }
  SECTION("empty image file") {
    t::write_bytes(dir / "a" / "empty.png", {});
    expect_error(dir.path(), dir / "a" / "empty.png", "not a readable");
  }
  SECTION("non-image file in a class folder") {
    t::write_bytes(dir / "a" / "notes.txt", {'h', 'i'});
    expect_error(dir.path(), dir / "a" / "notes.txt", "not an image file");
  }
  SECTION("empty class folder") {
    fs::create_directories(dir / "c");
    expect_error(dir.path(), dir / "c", "empty class folder");
  }
  SECTION("a folder inside a class folder") {
    fs::create_directories(dir / "a" / "more");
    expect_error(dir.path(), dir / "a" / "more", "unexpected folder");
  }
  SECTION("an image outside the class folders") {
    t::write_image(dir / "loose.png", 2, 2, 1, t::flat_pixels(2, 2, {1}));
    expect_error(dir.path(), dir / "loose.png", "image outside a class folder");
  }
  SECTION("missing folder") {
    expect_error(dir / "missing", dir / "missing", "folder not found");
  }
  SECTION("a file instead of a folder") {
    expect_error(dir / "a" / "1.png", dir / "a" / "1.png", "not a folder");
  }
  SECTION("a single class") {
    fs::remove_all(dir / "b");
    expect_error(dir.path(), dir.path(), "expected at least 2 class folders");
  }
  SECTION("index out of range") {
    auto data = open_image_folder(dir.path(), {});
    std::vector<float> out(data->shape().elements());
    CHECK_THROWS_AS(data->load(3, out.data()), DataError);
  }
}

TEST_CASE("image folder: only regular files are read, a FIFO, a device or a broken link is named", "[data][image]") {
  TempFolder dir;
  write_two_classes(dir.path(), ".png", 1);
  SECTION("a FIFO with an image name (opening it would block forever)") {
    REQUIRE(::mkfifo((dir / "a" / "pipe.png").c_str(), 0600) == 0);
    expect_error(dir.path(), dir / "a" / "pipe.png", "is a FIFO (named pipe), not a regular file");
  }
  SECTION("a link to /dev/zero (reading it never ends)") {
    fs::create_symlink("/dev/zero", dir / "b" / "zero.png");
    expect_error(dir.path(), dir / "b" / "zero.png", "is a device, not a regular file");
  }
  SECTION("a broken link") {
    fs::create_symlink(dir / "nowhere.png", dir / "b" / "gone.png");
    expect_error(dir.path(), dir / "b" / "gone.png", "broken symbolic link");
  }
  SECTION("a link to a regular image is read") {
    fs::create_symlink(dir / "a" / "1.png", dir / "b" / "linked.png");
    CHECK(open_image_folder(dir.path(), {})->size() == 4);
  }
}

TEST_CASE("image folder: a PNG header with an impossible size says so", "[data][image]") {
  TempFolder dir;
  write_two_classes(dir.path(), ".png", 1);
  // Width and height sit big-endian at bytes 16..23 of a PNG (after the signature and IHDR tag).
  auto with_size = [&](const fs::path& file, std::uint32_t width, std::uint32_t height) {
    std::vector<std::uint8_t> bytes = t::read_bytes(dir / "a" / "1.png");
    for (int i = 0; i < 4; ++i) {
      bytes[static_cast<std::size_t>(16 + i)] = static_cast<std::uint8_t>(width >> (24 - 8 * i));
      bytes[static_cast<std::size_t>(20 + i)] = static_cast<std::uint8_t>(height >> (24 - 8 * i));
    }
    t::write_bytes(file, bytes);
  };
  SECTION("too large (the first image is probed, the others decoded)") {
    for (const fs::path& file : {dir / "a" / "0.png", dir / "b" / "9.png"}) {
      with_size(file, 100000, 100000);
      expect_error(dir.path(), file, "the PNG header gives a size of 100000x100000: too large to decode");
      fs::remove(file);
    }
  }
  SECTION("zero width") {
    with_size(dir / "b" / "9.png", 0, 16);
    expect_error(dir.path(), dir / "b" / "9.png", "the PNG header gives a size of 0x16: an image needs at least one pixel");
  }
}
