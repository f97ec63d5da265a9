// JPEG through libjpeg-turbo: the same pixels as stb_image gives (within the two IDCTs' rounding),
// the DCT-domain scale chosen from what the output needs, progressive and CMYK files, and files
// cut short refused naming them.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "data/data_error.hpp"
#include "data/detail/image_codec.hpp"
#include "data/detail/jpeg_decoder.hpp"
#include "data_test_files.hpp"

#ifdef CNN_HAVE_TURBOJPEG
#include <turbojpeg.h>
#endif

using namespace cnn::data;
using cnn::data::test::TempFolder;
namespace t = cnn::data::test;
namespace fs = std::filesystem;

namespace {

// A smooth colour picture with some edges: what a photo gives a decoder to do.
std::vector<std::uint8_t> picture(int width, int height) {
  std::vector<std::uint8_t> pixels(static_cast<std::size_t>(width) * static_cast<std::size_t>(height) * 3);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      std::uint8_t* p = &pixels[(static_cast<std::size_t>(y) * static_cast<std::size_t>(width) + x) * 3];
      p[0] = static_cast<std::uint8_t>(255 * x / width);
      p[1] = static_cast<std::uint8_t>(255 * y / height);
      p[2] = static_cast<std::uint8_t>(((x / 16 + y / 16) % 2) ? 200 : 40);
    }
  return pixels;
}

double mean_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += std::fabs(a[i] - b[i]);
  return sum / static_cast<double>(a.size());
}

std::string decode_error(const fs::path& file, SampleShape target) {
  std::vector<float> out(target.elements());
  try {
    decode_image(file, target, out.data());
  } catch (const cnn::DataError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("jpeg: the DCT scale is the smallest of 1, 1/2, 1/4, 1/8 that keeps what the output needs", "[data][jpeg]") {
  CHECK(choose_jpeg_scale(4000, 3000, 224, 224).denominator == 8);  // 500x375
  CHECK(choose_jpeg_scale(4000, 3000, 600, 400).denominator == 4);  // 1000x750
  const JpegScale half = choose_jpeg_scale(640, 480, 320, 240);
  CHECK(half.denominator == 2);
  CHECK(half.width == 320);
  CHECK(half.height == 240);
  CHECK(choose_jpeg_scale(640, 480, 321, 240).denominator == 1);  // more than half: decoded whole
  const JpegScale odd = choose_jpeg_scale(1001, 999, 100, 100);  // TurboJPEG rounds each side up
  CHECK(odd.denominator == 8);
  CHECK(odd.width == 126);
  CHECK(odd.height == 125);
}

TEST_CASE("jpeg: decoded as stb_image decodes it, whole or at a reduced DCT scale", "[data][jpeg]") {
  TempFolder dir;
  const fs::path file = dir / "photo.jpg";
  t::write_image(file, 320, 256, 3, picture(320, 256));
  const fs::path png = dir / "photo.png";  // the same picture without the JPEG's loss
  t::write_image(png, 320, 256, 3, picture(320, 256));
  SECTION("at full size, RGB and grey") {
    for (int channels : {3, 1}) {
      const SampleShape shape{channels, 256, 320};
      std::vector<float> jpeg(shape.elements()), lossless(shape.elements());
      decode_image(file, shape, jpeg.data());
      decode_image(png, shape, lossless.data());
      CHECK(mean_abs_difference(jpeg, lossless) < 0.03);  // quality 95's loss
    }
  }
  SECTION("a quarter of each side, decoded at 1/4 (80x64), matches the lossless picture resized") {
    const SampleShape shape{3, 64, 80};
    std::vector<float> jpeg(shape.elements()), lossless(shape.elements());
    decode_image(file, shape, jpeg.data());
    decode_image(png, shape, lossless.data());
    CHECK(mean_abs_difference(jpeg, lossless) < 0.03);
  }
  SECTION("the shorter side's framing (256 to 64, the centre 64x64)") {
    const SampleShape shape{3, 64, 64};
    std::vector<float> jpeg(shape.elements()), lossless(shape.elements());
    decode_image(file, shape, jpeg.data(), kDefaultMaxDecodedImageBytes, 64);
    decode_image(png, shape, lossless.data(), kDefaultMaxDecodedImageBytes, 64);
    CHECK(mean_abs_difference(jpeg, lossless) < 0.03);
  }
}

namespace {

class FixedWindow final : public WindowChooser {
 public:
  explicit FixedWindow(ImageWindow w) : w_(w) {}
  ImageWindow choose(int, int) const override { return w_; }

 private:
  ImageWindow w_;
};

}  // namespace

TEST_CASE("jpeg: a window of the image as stored, resized, at a reduced DCT scale where it allows", "[data][jpeg]") {
  TempFolder dir;
  const fs::path file = dir / "photo.jpg", png = dir / "photo.png";
  t::write_image(file, 320, 256, 3, picture(320, 256));
  t::write_image(png, 320, 256, 3, picture(320, 256));
  const SampleShape shape{3, 32, 32};
  const FixedWindow window({64, 96, 128, 160});  // 1/4 of it (40x32) holds 32x32: decoded at 1/4
  std::vector<float> jpeg(shape.elements()), lossless(shape.elements()), mirrored(shape.elements());
  CHECK(decode_window(file, shape, window, false, jpeg.data()).width == 320);
  decode_window(png, shape, window, false, lossless.data());
  CHECK(mean_abs_difference(jpeg, lossless) < 0.03);
  // The lossless window resized: the red channel rises left to right across it, 96/320 to 256/320.
  CHECK(lossless[0] == Approx(96.0 / 320).margin(0.03));
  CHECK(lossless[31] == Approx(255.0 / 320).margin(0.03));
  decode_window(png, shape, window, true, mirrored.data());
  for (int y = 0; y < 32; ++y)
    for (int x = 0; x < 32; ++x) CHECK(mirrored[y * 32 + x] == lossless[y * 32 + 31 - x]);
  SECTION("a window outside the image is refused") {
    const FixedWindow outside({200, 0, 100, 100});
    CHECK_THROWS_AS(decode_window(png, shape, outside, false, jpeg.data()), cnn::ConfigError);
  }
}

TEST_CASE("jpeg: a file cut short is refused naming it, on every decoding path", "[data][jpeg]") {
  TempFolder dir;
  const fs::path file = dir / "cut.jpg";
  t::write_image(file, 64, 64, 3, picture(64, 64));
  std::vector<std::uint8_t> bytes = t::read_bytes(file);
  bytes.resize(bytes.size() * 2 / 3);
  t::write_bytes(file, bytes);
  const std::string what = decode_error(file, {3, 64, 64});
  CHECK(what.find(full_path(file)) != std::string::npos);
  CHECK(what.find("truncated") != std::string::npos);
}

#ifdef CNN_HAVE_TURBOJPEG

namespace {

// The picture through libjpeg-turbo's encoder: progressive, or from CMYK pixels (a CMYK JPEG).
void write_turbojpeg(const fs::path& path, int width, int height, int pixel_format, int flags) {
  std::vector<std::uint8_t> pixels = picture(width, height);
  if (pixel_format == TJPF_CMYK) {
    std::vector<std::uint8_t> cmyk;
    for (std::size_t p = 0; p < pixels.size(); p += 3) {
      const int k = 255 - std::max({pixels[p], pixels[p + 1], pixels[p + 2]});
      for (int c = 0; c < 3; ++c) cmyk.push_back(static_cast<std::uint8_t>(255 - pixels[p + c] - k));
      cmyk.push_back(static_cast<std::uint8_t>(k));
    }
    pixels = cmyk;
  }
  tjhandle encoder = tjInitCompress();
  REQUIRE(encoder);
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  const int subsampling = pixel_format == TJPF_CMYK ? TJSAMP_444 : TJSAMP_420;
  const int failed = tjCompress2(encoder, pixels.data(), width, 0, height, pixel_format, &jpeg, &size, subsampling,
                                 90, flags);
  std::vector<std::uint8_t> bytes(jpeg, jpeg + size);
  tjFree(jpeg);
  tjDestroy(encoder);
  REQUIRE(failed == 0);
  t::write_bytes(path, bytes);
}

}  // namespace

TEST_CASE("jpeg: progressive files decode as baseline ones do", "[data][jpeg]") {
  TempFolder dir;
  const fs::path baseline = dir / "baseline.jpg", progressive = dir / "progressive.jpg";
  write_turbojpeg(baseline, 128, 96, TJPF_RGB, 0);
  write_turbojpeg(progressive, 128, 96, TJPF_RGB, TJFLAG_PROGRESSIVE);
  for (const SampleShape shape : {SampleShape{3, 96, 128}, SampleShape{3, 24, 32}}) {
    std::vector<float> a(shape.elements()), b(shape.elements());
    decode_image(baseline, shape, a.data());
    decode_image(progressive, shape, b.data());
    CHECK(mean_abs_difference(a, b) < 0.01);
  }
}

TEST_CASE("jpeg: a CMYK file is decoded to RGB (through stb_image) or refused naming it", "[data][jpeg]") {
  TempFolder dir;
  const fs::path cmyk = dir / "cmyk.jpg";
  write_turbojpeg(cmyk, 64, 48, TJPF_CMYK, 0);
  const std::string what = decode_error(cmyk, {3, 48, 64});
  if (!what.empty()) CHECK(what.find(full_path(cmyk)) != std::string::npos);
}

#endif

TEST_CASE("jpeg: a file that fails leaves the next one on the same thread decodable", "[data][jpeg]") {
  TempFolder dir;
  const fs::path good = dir / "good.jpg", bad = dir / "bad.jpg";
  t::write_image(good, 32, 24, 3, picture(32, 24));
  std::vector<std::uint8_t> bytes = t::read_bytes(good);
  // A component id in the start-of-scan header that no frame component has.
  const std::uint8_t scan[2] = {0xFF, 0xDA};
  const auto sos = static_cast<std::size_t>(std::search(bytes.begin(), bytes.end(), scan, scan + 2) - bytes.begin());
  bytes[sos + 5] = 9;
  t::write_bytes(bad, bytes);
  const SampleShape shape{3, 24, 32};
  for (int round = 0; round < 2; ++round) {
    const std::string what = decode_error(bad, shape);
    CHECK(what.find(full_path(bad)) != std::string::npos);
    CHECK(decode_error(good, shape).empty());
  }
}

TEST_CASE("jpeg: a sample of more than the bytes a thread keeps between images is written whole",
          "[data][jpeg][slow_under_sanitizers]") {
  // 3x4800x4800 bytes (69 MB) are over what a thread keeps (64 MiB): its buffer is given back,
  // after the sample has been copied out of it.
  TempFolder dir;
  const fs::path file = dir / "small.png";
  t::write_image(file, 8, 8, 3, t::flat_pixels(8, 8, {255, 0, 51}));
  const SampleShape shape{3, 4800, 4800};
  std::vector<float> out(shape.elements(), -7.0f);
  decode_image(file, shape, out.data());
  CHECK(out.front() == 1.0f);
  CHECK(out[shape.elements() / 3] == 0.0f);
  CHECK(out.back() == Approx(0.2f));
}

#ifdef CNN_HAVE_TURBOJPEG
TEST_CASE("jpeg: a progressive file counts its coefficients against the limit, before decoding", "[data][jpeg]") {
  TempFolder dir;
  const fs::path progressive = dir / "progressive.jpg";
  write_turbojpeg(progressive, 128, 96, TJPF_RGB, TJFLAG_PROGRESSIVE);
  std::vector<float> out(3 * 12 * 16);
  // 128 x 96 x 3 pixels fit in 40,000 bytes; the 73,728 bytes of coefficients do not.
  try {
    decode_image(progressive, {3, 12, 16}, out.data(), 40000);
    FAIL("expected the coefficients refused");
  } catch (const cnn::DataError& e) {
    CHECK(std::string(e.what()).find("progressive JPEG of 128x96 holds all its coefficients") != std::string::npos);
  }
  CHECK_NOTHROW(decode_image(progressive, {3, 12, 16}, out.data(), 80000));
}
#endif

namespace {

// The JPEG with an APP1 EXIF segment after its start-of-image marker, giving `orientation`
// (a little-endian TIFF of one directory entry: tag 0x0112, SHORT, 1 value).
void add_exif_orientation(const fs::path& file, int orientation) {
  std::vector<std::uint8_t> bytes = t::read_bytes(file);
  const std::vector<std::uint8_t> tiff = {'I', 'I', 42, 0, 8, 0, 0, 0,  // byte order, magic, first directory
                                          1, 0,                           // one entry
                                          0x12, 0x01, 3, 0, 1, 0, 0, 0,   // orientation, SHORT, count 1
                                          static_cast<std::uint8_t>(orientation), 0, 0, 0,
                                          0, 0, 0, 0};                    // no next directory
  std::vector<std::uint8_t> segment = {0xFF, 0xE1, 0, 0, 'E', 'x', 'i', 'f', 0, 0};
  segment.insert(segment.end(), tiff.begin(), tiff.end());
  const std::size_t length = segment.size() - 2;
  segment[2] = static_cast<std::uint8_t>(length >> 8);
  segment[3] = static_cast<std::uint8_t>(length & 0xFF);
  bytes.insert(bytes.begin() + 2, segment.begin(), segment.end());
  t::write_bytes(file, bytes);
}

}  // namespace

TEST_CASE("jpeg: a photo is turned to its EXIF orientation, as PIL's exif_transpose turns it", "[data][jpeg]") {
  TempFolder dir;
  // 40 wide, 20 high: red on the left half, blue on the right.
  std::vector<std::uint8_t> pixels;
  for (int y = 0; y < 20; ++y)
    for (int x = 0; x < 40; ++x) {
      const bool left = x < 20;
      pixels.insert(pixels.end(), {static_cast<std::uint8_t>(left ? 250 : 0), 0,
                                   static_cast<std::uint8_t>(left ? 0 : 250)});
    }
  struct Case {
    int orientation;
    int height, width;
    bool red_first;  // red at the first pixel (top-left) of the shown image
  };
  for (const Case c : {Case{1, 20, 40, true}, Case{3, 20, 40, false}, Case{6, 40, 20, true}, Case{8, 40, 20, false},
                       Case{2, 20, 40, false}, Case{5, 40, 20, true}}) {
    INFO("orientation " << c.orientation);
    const fs::path file = dir / ("turned" + std::to_string(c.orientation) + ".jpg");
    t::write_image(file, 40, 20, 3, pixels);
    add_exif_orientation(file, c.orientation);
    const ImageInfo info = verify_image(file);
    CHECK(info.height == c.height);
    CHECK(info.width == c.width);
    const SampleShape shape{3, c.height, c.width};
    std::vector<float> out(shape.elements());
    CHECK(decode_image(file, shape, out.data()).height == c.height);
    const std::size_t plane = static_cast<std::size_t>(c.height) * static_cast<std::size_t>(c.width);
    CHECK((out[0] > 0.5f) == c.red_first);                // red, top-left
    CHECK((out[2 * plane] > 0.5f) == !c.red_first);       // blue, top-left
    CHECK((out[plane - 1] > 0.5f) == !c.red_first);       // red, bottom-right
  }
  SECTION("a malformed EXIF segment leaves the photo as stored") {
    const fs::path file = dir / "bad_exif.jpg";
    t::write_image(file, 40, 20, 3, pixels);
    std::vector<std::uint8_t> bytes = t::read_bytes(file);
    const std::vector<std::uint8_t> broken = {0xFF, 0xE1, 0, 12, 'E', 'x', 'i', 'f', 0, 0, 'M', 'M', 0, 42};
    bytes.insert(bytes.begin() + 2, broken.begin(), broken.end());
    t::write_bytes(file, bytes);
    CHECK(verify_image(file).width == 40);
  }
}
