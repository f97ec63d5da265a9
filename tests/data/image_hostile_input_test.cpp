// Images built to hurt: small files that declare huge sizes, PNGs whose checksums do not match
// (stb_image checks neither the chunk CRCs nor the zlib adler-32), and what skip_corrupt does
// with them.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "data/data_error.hpp"
#include <cnnengine/data/dataset.hpp>
#include "data/image_folder_dataset.hpp"
#include "data_test_files.hpp"

using namespace cnn::data;
using cnn::data::test::TempFolder;
namespace t = cnn::data::test;
namespace fs = std::filesystem;

namespace {

// Opens the folder (and loads every image, for the lazy path) expecting a DataError.
std::string open_error(const fs::path& folder, const ImageFolderOptions& options, SampleShape target = {1, 8, 8}) {
  try {
    auto data = open_image_folder(folder, target, options);
    std::vector<float> out(data->shape().elements());
    for (std::size_t i = 0; i < data->size(); ++i) data->load(i, out.data());
  } catch (const DataError& e) {
    return e.what();
  }
  FAIL("expected a DataError opening " << folder);
  return {};
}

void check_words(const std::string& what, const std::vector<std::string>& words) {
  INFO(what);
  for (const std::string& w : words) CHECK(what.find(w) != std::string::npos);
}

ImageFolderOptions eager_or_lazy(bool lazy) {
  ImageFolderOptions options;
  if (lazy) options.eager_decode_limit = 0;
  return options;
}

// Classes a (two images) and b (one), 12x10 RGB noise PNGs.
void write_two_classes(const fs::path& root) {
  std::vector<std::uint8_t> pixels(12 * 10 * 3);
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<std::uint8_t>(i * 7919 % 251);
  for (const char* name : {"a/1.png", "a/2.png", "b/1.png"}) t::write_image(root / name, 12, 10, 3, pixels);
}

// Where the chunk of this type starts (its length field) in a PNG.
std::size_t chunk_at(const std::vector<std::uint8_t>& png, const std::string& type) {
  const auto it = std::search(png.begin(), png.end(), type.begin(), type.end());
  REQUIRE(it != png.end());
  return static_cast<std::size_t>(it - png.begin()) - 4;
}

std::uint32_t chunk_length(const std::vector<std::uint8_t>& png, std::size_t at) {
  return std::uint32_t{png[at]} << 24 | std::uint32_t{png[at + 1]} << 16 | std::uint32_t{png[at + 2]} << 8 | png[at + 3];
}

// Writes the CRC a chunk's type and data call for, so that only what is inside the data is wrong.
void fix_crc(std::vector<std::uint8_t>& png, std::size_t at) {
  const std::size_t end = at + 8 + chunk_length(png, at);
  const std::uint32_t crc = t::crc32(std::vector<std::uint8_t>(png.begin() + static_cast<std::ptrdiff_t>(at + 4),
                                                               png.begin() + static_cast<std::ptrdiff_t>(end)));
  for (int i = 0; i < 4; ++i) png[end + static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(crc >> (24 - 8 * i));
}

}  // namespace

TEST_CASE("image hostile: a 5.7 MB PNG declaring 30000x30000 (900 MB decoded) is refused before decoding", "[data][image][hostile]") {
  TempFolder dir;
  write_two_classes(dir.path());
  const fs::path huge = dir / "b" / "huge.png";
  t::write_bytes(huge, t::zero_png(30000, 30000));
  REQUIRE(fs::file_size(huge) < 6000000);
  const bool lazy = GENERATE(false, true);

  const long rss_before = t::peak_rss_mib();
  const auto start = std::chrono::steady_clock::now();
  const std::string what = open_error(dir.path(), eager_or_lazy(lazy));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  check_words(what, {full_path(huge), "30000x30000 with 1 channel decodes to 900000000 bytes",
                     "over the limit of 268435456 bytes"});
  CHECK(seconds < 1.0);
  CHECK(t::peak_rss_mib() - rss_before < 200);
}

TEST_CASE("image hostile: JPEG and BMP headers declaring huge sizes are refused too", "[data][image][hostile]") {
  TempFolder dir;
  write_two_classes(dir.path());
  std::vector<std::uint8_t> noise(16 * 16);
  for (std::size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<std::uint8_t>(i * 31 % 256);
  SECTION("JPEG: the frame header's height and width") {
    const fs::path file = dir / "b" / "huge.jpg";
    t::write_image(file, 16, 16, 1, noise);
    std::vector<std::uint8_t> bytes = t::read_bytes(file);
    const std::uint8_t frame[2] = {0xFF, 0xC0};
    const auto sof = std::search(bytes.begin(), bytes.end(), frame, frame + 2) - bytes.begin();
    for (std::size_t at : {5u, 7u}) {  // after the marker, the length and the precision
      bytes[static_cast<std::size_t>(sof) + at] = 16000 >> 8;
      bytes[static_cast<std::size_t>(sof) + at + 1] = 16000 & 0xFF;
    }
    t::write_bytes(file, bytes);
    // stb_image_write's JPEGs are colour; 30000x30000 of them would be over stb_image's own limit.
    check_words(open_error(dir.path(), {}), {full_path(file), "16000x16000 with 3 channels decodes to 768000000 bytes"});
  }
  SECTION("BMP: width and height") {
    const fs::path file = dir / "b" / "huge.bmp";
    t::write_image(file, 16, 16, 1, noise);
    std::vector<std::uint8_t> bytes = t::read_bytes(file);
    for (std::size_t at : {18u, 22u}) std::memcpy(&bytes[at], "\x30\x75\x00\x00", 4);  // 30000, little-endian
    t::write_bytes(file, bytes);
    check_words(open_error(dir.path(), {}), {full_path(file), "30000x30000 with 3 channels decodes to"});
  }
}

TEST_CASE("image hostile: headers stb_image would trust", "[data][image][hostile]") {
  TempFolder dir;
  write_two_classes(dir.path());
  std::vector<std::uint8_t> noise(16 * 16);
  for (std::size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<std::uint8_t>(i * 31 % 256);
  const bool lazy = GENERATE(false, true);
  SECTION("a JPEG Huffman table of more than 256 codes (stb_image 2.27 writes past its tables)") {
    const fs::path file = dir / "b" / "tables.jpg";
    t::write_image(file, 16, 16, 1, noise);
    std::vector<std::uint8_t> bytes = t::read_bytes(file);
    const std::uint8_t tables[2] = {0xFF, 0xC4};
    const auto dht = static_cast<std::size_t>(std::search(bytes.begin(), bytes.end(), tables, tables + 2) - bytes.begin());
    bytes[dht + 6] = 255;  // the counts of codes of 2 and 3 bits, after the marker, length and table id
    bytes[dht + 7] = 255;
    t::write_bytes(file, bytes);
    check_words(open_error(dir.path(), eager_or_lazy(lazy)), {full_path(file), "corrupt image: a JPEG Huffman table", "at most 256"});
    SECTION("also after 0xFF fill bytes before the start-of-image marker, which stb_image skips") {
      bytes.insert(bytes.begin(), 5, 0xFF);
      t::write_bytes(file, bytes);
      check_words(open_error(dir.path(), eager_or_lazy(lazy)), {full_path(file), "a JPEG Huffman table"});
    }
  }
  SECTION("a JPEG of more than 64 scans (each decodes the whole image again)") {
    const fs::path file = dir / "b" / "scans.jpg";
    t::write_image(file, 16, 16, 1, noise);
    const std::vector<std::uint8_t> one_scan = t::read_bytes(file);
    const std::uint8_t scan_start[2] = {0xFF, 0xDA};
    const auto scan = std::search(one_scan.begin(), one_scan.end(), scan_start, scan_start + 2);
    const auto end_of_image = one_scan.end() - 2;
    std::vector<std::uint8_t> bytes(one_scan.begin(), scan);
    for (int i = 0; i < 65; ++i) bytes.insert(bytes.end(), scan, end_of_image);
    bytes.insert(bytes.end(), end_of_image, one_scan.end());
    t::write_bytes(file, bytes);
    check_words(open_error(dir.path(), eager_or_lazy(lazy)), {full_path(file), "too many JPEG scans: more than 64"});
  }
  SECTION("a BMP of width 0 (stb_image returns no pixels and success)") {
    const fs::path file = dir / "b" / "empty.bmp";
    t::write_image(file, 4, 4, 3, std::vector<std::uint8_t>(48, 9));
    std::vector<std::uint8_t> bytes = t::read_bytes(file);
    std::memset(&bytes[18], 0, 4);
    t::write_bytes(file, bytes);
    check_words(open_error(dir.path(), eager_or_lazy(lazy)), {full_path(file), "the header gives a size of 0x4: an image needs at least one pixel"});
  }
}

TEST_CASE("image hostile: the size limit is an option", "[data][image][hostile]") {
  TempFolder dir;
  write_two_classes(dir.path());
  t::write_bytes(dir / "b" / "zeros.png", t::zero_png(64, 64));
  ImageFolderOptions options;
  options.max_decoded_image_bytes = 64 * 64 - 1;
  check_words(open_error(dir.path(), options), {full_path(dir / "b" / "zeros.png"), "64x64 with 1 channel decodes to 4096 bytes, over the limit of 4095 bytes"});
  options.max_decoded_image_bytes = 64 * 64 * 3;  // the 12x10 RGB images and the grey 64x64
  auto data = open_image_folder(dir.path(), SampleShape{1, 8, 8}, options);
  REQUIRE(data->size() == 4);
  std::vector<float> out(64);
  data->load(3, out.data());
  CHECK(std::all_of(out.begin(), out.end(), [](float v) { return v == 0.0f; }));
}

TEST_CASE("image hostile: a PNG whose checksums do not match is corrupt", "[data][image][hostile]") {
  TempFolder dir;
  write_two_classes(dir.path());
  const fs::path file = dir / "a" / "2.png";
  std::vector<std::uint8_t> png = t::read_bytes(file);
  const std::size_t idat = chunk_at(png, "IDAT");
  const std::size_t idat_end = idat + 8 + chunk_length(png, idat);
  const bool lazy = GENERATE(false, true);

  SECTION("the zlib stream's adler-32 (the chunk CRC recomputed)") {
    png[idat_end - 1] ^= 0x01;
    fix_crc(png, idat);
    t::write_bytes(file, png);
    check_words(open_error(dir.path(), eager_or_lazy(lazy)), {full_path(file), "corrupt image", "incorrect data check"});
  }
  SECTION("a chunk's CRC") {
    png[idat_end] ^= 0x80;
    t::write_bytes(file, png);
    check_words(open_error(dir.path(), eager_or_lazy(lazy)), {full_path(file), "corrupt image: CRC mismatch in the IDAT chunk"});
  }
  SECTION("a compressed byte changed (the chunk CRC recomputed)") {
    png[(idat + 8 + idat_end) / 2] ^= 0x10;
    fix_crc(png, idat);
    t::write_bytes(file, png);
    check_words(open_error(dir.path(), eager_or_lazy(lazy)), {full_path(file), "corrupt image"});
  }
  SECTION("the header's CRC") {
    png[chunk_at(png, "IHDR") + 8 + 13] ^= 0x01;
    t::write_bytes(file, png);
    check_words(open_error(dir.path(), eager_or_lazy(lazy)), {full_path(file), "CRC mismatch in the IHDR chunk"});
  }
  SECTION("no IEND") {
    png.resize(chunk_at(png, "IEND"));
    t::write_bytes(file, png);
    check_words(open_error(dir.path(), eager_or_lazy(lazy)), {full_path(file), "corrupt image: truncated PNG"});
  }
}

TEST_CASE("image hostile: the PNG checks accept what stb_image reads: bit depths, Adam7, Apple's CgBI", "[data][image][hostile]") {
  TempFolder dir;
  write_two_classes(dir.path());
  const int depth = GENERATE(1, 2, 4, 8);
  const bool interlaced = GENERATE(false, true);
  const auto [width, height] = GENERATE(std::pair{1, 1}, std::pair{3, 2}, std::pair{9, 7}, std::pair{17, 12});
  const bool cgbi = depth == 8 && GENERATE(false, true);
  INFO("depth " << depth << (interlaced ? ", interlaced " : " ") << width << "x" << height << (cgbi ? ", CgBI" : ""));
  std::vector<std::uint8_t> values(static_cast<std::size_t>(width * height));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<std::uint8_t>((i * 7 + 3) % (1u << depth));
  t::write_bytes(dir / "b" / "grey.png", t::grey_png(width, height, depth, interlaced, values, cgbi));
  auto data = open_image_folder(dir.path(), SampleShape{1, height, width});
  std::vector<float> out(values.size());
  data->load(3, out.data());
  const int scale = 255 / ((1 << depth) - 1);  // stb_image widens low bit depths to 8 bits
  for (std::size_t i = 0; i < values.size(); ++i) REQUIRE(out[i] * 255.0f == Approx(values[i] * scale));
}

TEST_CASE("image hostile: skip_corrupt leaves unreadable images out and says which", "[data][image][hostile]") {
  TempFolder dir;
  write_two_classes(dir.path());
  const fs::path bad = dir / "a" / "1.png";
  std::vector<std::uint8_t> png = t::read_bytes(bad);
  png[chunk_at(png, "IDAT") + 8] ^= 0x01;  // the chunk CRC no longer matches
  t::write_bytes(bad, png);
  t::write_bytes(dir / "b" / "huge.png", t::zero_png(30000, 30000));

  ImageFolderOptions options = eager_or_lazy(GENERATE(false, true));
  options.skip_corrupt = true;
  std::vector<std::string> warnings;
  options.on_skipped = [&](const std::string& line) { warnings.push_back(line); };

  SECTION("the others are read; one warning each, in file order") {
    auto data = open_image_folder(dir.path(), SampleShape{0, 0, 0}, options);  // the first readable image decides
    CHECK(data->size() == 2);
    CHECK(data->shape() == SampleShape{3, 10, 12});
    CHECK(data->label(0) == 0);
    CHECK(data->label(1) == 1);
    std::vector<float> out(data->shape().elements());
    data->load(1, out.data());
    CHECK(data->description().find("2 unreadable images skipped") != std::string::npos);
    REQUIRE(warnings.size() == 2);
    check_words(warnings[0], {"skipped", full_path(bad), "CRC mismatch"});
    check_words(warnings[1], {"skipped", full_path(dir / "b" / "huge.png"), "over the limit"});
  }
  SECTION("a class left with no image is an error") {
    fs::remove(dir / "a" / "2.png");
    check_words(open_error(dir.path(), options), {full_path(dir / "a"), "no readable image left", "1 skipped"});
  }
  SECTION("open_dataset passes the options on, to both sides") {
    for (const char* side : {"train", "test"}) {
      write_two_classes(dir / side);
      t::write_bytes(dir / side / "a" / "1.png", png);
    }
    DatasetSplits splits = open_dataset(dir.path(), SampleShape{3, 8, 8}, 1, options);
    CHECK(splits.train->size() == 2);
    CHECK(splits.test->size() == 2);
    CHECK(warnings.size() == 2);
  }
  SECTION("without it, the first bad image is the error") {
    options.skip_corrupt = false;
    check_words(open_error(dir.path(), options), {full_path(bad), "CRC mismatch"});
    CHECK(warnings.empty());
  }
}
