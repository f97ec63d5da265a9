// The decoded cache: samples from it match the files', a file cache is kept from run to run and
// trusted only where it checks (its data's identity, each image's CRC-32), another's file is never
// written over, one run holds it at a time, and max_bytes bounds it.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <cnnengine/base/error.hpp>
#include "data/data_error.hpp"
#include "data/detail/decoded_cache.hpp"
#include "data/image_folder_dataset.hpp"
#include "data/image_table_dataset.hpp"
#include "data/segmentation_dataset.hpp"
#include "data_test_files.hpp"
#include "task_test_folders.hpp"

using namespace cnn::data;
using cnn::data::test::TempFolder;
namespace t = cnn::data::test;
namespace fs = std::filesystem;

namespace {

// Three classes of two gradient images each, 40x30 and 30x40 (smooth: any resampling agrees).
void write_photos(const fs::path& root) {
  int k = 0;
  for (const char* name : {"a", "b", "c"})
    for (int i = 0; i < 2; ++i, ++k) {
      const int w = i ? 30 : 40, h = i ? 40 : 30;
      std::vector<std::uint8_t> pixels;
      for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
          for (int c = 0; c < 3; ++c) pixels.push_back(static_cast<std::uint8_t>(x * 2 + y * 2 + c * 20 + k * 10));
      t::write_image(root / name / (std::to_string(i) + ".png"), w, h, 3, pixels);
    }
}

ImageFolderOptions cached(const fs::path& folder = {}, std::size_t max_bytes = std::size_t{1} << 30) {
  ImageFolderOptions o;
  o.eager_decode_limit = 0;  // decoded on load: where the cache applies
  o.cache.enabled = true;
  o.cache.folder = folder;
  o.cache.max_bytes = max_bytes;
  return o;
}

std::vector<float> all_samples(const Dataset& data) {
  std::vector<float> out(data.size() * data.shape().elements());
  for (std::size_t i = 0; i < data.size(); ++i) data.load(i, out.data() + i * data.shape().elements());
  return out;
}

double largest_difference(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double most = 0;
  for (std::size_t i = 0; i < a.size(); ++i) most = std::max(most, std::fabs(double(a[i]) - b[i]));
  return most;
}

std::vector<fs::path> cache_files(const fs::path& folder) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(folder)) files.push_back(entry.path());
  return files;
}

}  // namespace

TEST_CASE("decoded cache: the size an image is kept at", "[data][cache]") {
  CHECK(kept_size(300, 400, 256) == std::pair{256, 341});
  CHECK(kept_size(400, 300, 256) == std::pair{341, 256});
  CHECK(kept_size(100, 400, 256) == std::pair{100, 400});  // no larger than it is
  CHECK(kept_size(5, 5, 0) == std::pair{5, 5});
}

TEST_CASE("decoded cache: samples from it are the files' (kept at the framing's side), the same each time",
          "[data][cache]") {
  TempFolder dir;
  write_photos(dir / "photos");
  const SampleShape shape{3, 20, 20};
  ImageFolderOptions plain = cached();
  plain.cache.enabled = false;
  plain.resize_shorter_side = 24;
  ImageFolderOptions memory = cached();
  memory.resize_shorter_side = 24;  // kept at 24 on the shorter side: the framing resizes no further
  auto files = open_image_folder(dir / "photos", shape, plain);
  auto in_memory = open_image_folder(dir / "photos", shape, memory);
  CHECK(in_memory->description().find("decoded once, kept in memory: 6 of 6 images at 24") != std::string::npos);
  const std::vector<float> first = all_samples(*in_memory);  // fills it
  CHECK(all_samples(*in_memory) == first);                   // from it
  CHECK(largest_difference(first, all_samples(*files)) < 2.0 / 255);
}

TEST_CASE("decoded cache: a file kept from run to run, rebuilt for other data, checked image by image",
          "[data][cache]") {
  TempFolder dir;
  write_photos(dir / "photos");
  const SampleShape shape{3, 16, 16};
  const ImageFolderOptions options = cached(dir / "cache");
  fs::create_directories(dir / "cache");
  std::vector<float> reference;
  {
    auto data = open_image_folder(dir / "photos", shape, options);
    reference = all_samples(*data);
  }
  const std::vector<fs::path> kept = cache_files(dir / "cache");
  REQUIRE(kept.size() == 1);
  SECTION("a later run reads it") {
    auto data = open_image_folder(dir / "photos", shape, options);
    CHECK(all_samples(*data) == reference);
  }
  SECTION("a damaged image is decoded again, not trusted") {
    std::vector<std::uint8_t> bytes = t::read_bytes(kept[0]);
    for (std::size_t i = bytes.size() - 4096; i < bytes.size(); ++i) bytes[i] ^= 0x5A;  // the last image's pixels
    for (std::size_t i = 8192; i < 8192 + 512; ++i) bytes[i] ^= 0x5A;                    // the first image's
    t::write_bytes(kept[0], bytes);
    auto data = open_image_folder(dir / "photos", shape, options);
    CHECK(all_samples(*data) == reference);
  }
  SECTION("other data (a file changed) rebuilds it") {
    t::write_image(dir / "photos" / "a" / "0.png", 40, 30, 3, t::flat_pixels(40, 30, {0, 0, 0}));
    auto data = open_image_folder(dir / "photos", shape, options);
    const std::vector<float> now = all_samples(*data);
    CHECK(now[0] == 0.0f);
    CHECK(std::vector<float>(now.begin() + shape.elements(), now.end()) ==
          std::vector<float>(reference.begin() + shape.elements(), reference.end()));
  }
  SECTION("a file that is not a cache of ours is refused, and left as it was") {
    t::write_bytes(kept[0], {'n', 'o', 't', ' ', 'o', 'u', 'r', 's', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                              0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                              0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
    const std::vector<std::uint8_t> before = t::read_bytes(kept[0]);
    CHECK_THROWS_WITH(open_image_folder(dir / "photos", shape, options),
                      Catch::Contains("not a decoded cache of cnnengine: not written over"));
    CHECK(t::read_bytes(kept[0]) == before);
  }
  SECTION("one run holds it at a time") {
    auto holding = open_image_folder(dir / "photos", shape, options);
    CHECK_THROWS_WITH(open_image_folder(dir / "photos", shape, options),
                      Catch::Contains("in use by another run"));
  }
}

TEST_CASE("decoded cache: max_bytes bounds it, and the images beyond are decoded from their files", "[data][cache]") {
  TempFolder dir;
  write_photos(dir / "photos");
  const SampleShape shape{3, 16, 16};
  // Each image kept at 16 on its shorter side takes 3 x 16 x 21 bytes, a page: two pages hold two.
  auto data = open_image_folder(dir / "photos", shape, cached({}, 2 * 4096));
  CHECK(data->description().find("2 of 6 images") != std::string::npos);
  ImageFolderOptions plain = cached();
  plain.cache.enabled = false;
  auto files = open_image_folder(dir / "photos", shape, plain);
  CHECK(largest_difference(all_samples(*data), all_samples(*files)) < 2.0 / 255);
}

TEST_CASE("decoded cache: labels.csv and segmentation folders keep their images too", "[data][cache]") {
  TempFolder dir;
  SECTION("a multi-label folder") {
    const fs::path side = dir / "table";
    write_photos(side / "images");
    std::string csv = "file,x,y\n";
    for (const char* name : {"a", "b", "c"})
      for (int i = 0; i < 2; ++i) csv += std::string(name) + "/" + std::to_string(i) + ".png,1,0\n";
    t::write_bytes(side / "labels.csv", std::vector<std::uint8_t>(csv.begin(), csv.end()));
    const SampleShape shape{3, 16, 16};
    ImageFolderOptions plain = cached();
    plain.cache.enabled = false;
    auto files = open_image_table(side, shape, cnn::Task::multilabel, {}, plain);
    auto kept = open_image_table(side, shape, cnn::Task::multilabel, {}, cached());
    CHECK(kept->description().find("decoded once, kept in memory: 6 of 6 images") != std::string::npos);
    const std::vector<float> first = all_samples(*kept);
    CHECK(all_samples(*kept) == first);
    CHECK(largest_difference(first, all_samples(*files)) < 2.0 / 255);
  }
  SECTION("a segmentation folder") {
    t::write_segmentation_folder(dir / "segmentation");
    const SampleShape shape{3, 2, 4};
    auto kept = open_segmentation_folder(dir / "segmentation" / "train", shape, {}, cached());
    CHECK(kept->description().find("decoded once, kept in memory: 3 of 3 images") != std::string::npos);
    const std::vector<float> first = all_samples(*kept);
    CHECK(all_samples(*kept) == first);
  }
}
