// Mutated files: whatever the bytes, opening either works or throws DataError; nothing crashes.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include <cnnengine/base/error.hpp>
#include "data/data_error.hpp"
#include "data/detail/random.hpp"
#include "data/idx_dataset.hpp"
#include "data/image_folder_dataset.hpp"
#include "data_test_files.hpp"

using namespace cnn::data;
using cnn::data::test::TempFolder;
namespace t = cnn::data::test;
namespace fs = std::filesystem;

namespace {

// Flips, overwrites or cuts a few bytes, chosen by rng.
std::vector<std::uint8_t> mutate(std::vector<std::uint8_t> bytes, SplitMix64& rng) {
  const int edits = 1 + static_cast<int>(rng.below(4));
  for (int e = 0; e < edits && !bytes.empty(); ++e) {
    const std::size_t at = rng.below(bytes.size());
    switch (rng.below(3)) {
      case 0: bytes[at] ^= static_cast<std::uint8_t>(1u << rng.below(8)); break;
      case 1: bytes[at] = static_cast<std::uint8_t>(rng.below(256)); break;
      default: bytes.resize(at); break;
    }
  }
  return bytes;
}

// Opens and loads everything; true when it worked, false on a DataError (anything else fails).
template <typename Open>
bool survives(Open open) {
  try {
    std::unique_ptr<Dataset> data = open();
    std::vector<float> out(data->shape().elements());
    for (std::size_t i = 0; i < data->size(); ++i) data->load(i, out.data());
    return true;
  } catch (const DataError&) {
    return false;
  }
}

}  // namespace

TEST_CASE("corrupt input: mutated IDX files", "[data][idx][corrupt]") {
  TempFolder dir;
  const std::vector<std::uint8_t> images = t::idx_images(6, 4, 4), labels = t::idx_labels(6, 3);
  SplitMix64 rng(99);
  int rejected = 0;
  for (int round = 0; round < 300; ++round) {
    const bool gz = round % 2;
    const bool hit_images = (round / 2) % 2;
    std::vector<std::uint8_t> a = gz ? t::gzip_bytes(images) : images, b = gz ? t::gzip_bytes(labels) : labels;
    (hit_images ? a : b) = mutate(hit_images ? a : b, rng);
    t::write_bytes(dir / "images", a);
    t::write_bytes(dir / "labels", b);
    rejected += !survives([&] { return open_idx(dir / "images", dir / "labels"); });
  }
  CHECK(rejected > 150);
}

TEST_CASE("corrupt input: mutated PNG, BMP and JPEG files", "[data][image][corrupt]") {
  TempFolder dir;
  std::vector<std::uint8_t> pixels(12 * 10 * 3);
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<std::uint8_t>(i * 37 % 256);
  t::write_image(dir / "b" / "ok.png", 2, 2, 1, t::flat_pixels(2, 2, {7}));
  SplitMix64 rng(7);
  int rejected = 0;
  for (const std::string ext : {".png", ".bmp", ".jpg"}) {
    const fs::path sample = dir / ("sample" + ext);
    t::write_image(sample, 12, 10, 3, pixels);
    const std::vector<std::uint8_t> valid = t::read_bytes(sample);
    for (int round = 0; round < 150; ++round) {
      t::write_bytes(dir / "a" / ("x" + ext), mutate(valid, rng));
      const bool lazy = round % 2;
      rejected += !survives([&] { return open_image_folder(dir.path(), SampleShape{3, 8, 8}, lazy ? 0 : kEagerDecodeLimit); });
      fs::remove(dir / "a" / ("x" + ext));
    }
  }
  CHECK(rejected > 100);
}
