#include <catch2/catch.hpp>
#include <cstdint>
#include <sys/stat.h>

#include <algorithm>
#include <string>
#include <vector>

#include <cnnengine/base/error.hpp>
#include "data/data_error.hpp"
#include "data/idx_dataset.hpp"
#include "data_test_files.hpp"

using namespace cnn::data;
using cnn::data::test::TempFolder;
namespace t = cnn::data::test;

namespace {

// Expects open_idx to throw a DataError naming `path` and containing `words`.
void expect_error(const std::filesystem::path& images, const std::filesystem::path& labels,
                  const std::filesystem::path& named, const std::string& words) {
  try {
    open_idx(images, labels);
    FAIL("expected a DataError naming " << named);
  } catch (const DataError& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find(full_path(named)) != std::string::npos);
    CHECK(what.find(words) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("IDX: a valid raw pair opens and loads scaled pixels", "[data][idx]") {
  TempFolder dir;
  t::write_bytes(dir / "images", t::idx_images(5, 3, 4));
  t::write_bytes(dir / "labels", t::idx_labels(5, 3));
  auto data = open_idx(dir / "images", dir / "labels");
  CHECK(data->size() == 5);
  CHECK(data->shape() == SampleShape{1, 3, 4});
  CHECK(data->num_classes() == 3);
  CHECK(data->class_names() == std::vector<std::string>{"0", "1", "2"});
  CHECK(data->host_bytes() == 5 * 12 + 5);
  CHECK(data->description().find("5 images 1x3x4, 3 classes") != std::string::npos);
  std::vector<float> out(12);
  CHECK(data->load(4, out.data()) == 1);
  for (int p = 0; p < 12; ++p) CHECK(out[p] == Approx((4 + p) / 255.0f));
  CHECK(data->label(2) == 2);
  CHECK_THROWS_AS(data->load(5, out.data()), DataError);
}

TEST_CASE("IDX: gzip and raw files give the same samples", "[data][idx]") {
  TempFolder dir;
  t::write_gzip(dir / "images.gz", t::idx_images(300, 28, 28));  // > 64 KiB: several stored blocks
  t::write_gzip(dir / "labels.gz", t::idx_labels(300, 10));
  t::write_bytes(dir / "images", t::idx_images(300, 28, 28));
  t::write_bytes(dir / "labels", t::idx_labels(300, 10));
  auto gz = open_idx(dir / "images.gz", dir / "labels.gz");
  auto raw = open_idx(dir / "images", dir / "labels");
  REQUIRE(gz->size() == 300);
  std::vector<float> a(784), b(784);
  for (std::size_t i : {0u, 123u, 299u}) {
    CHECK(gz->load(i, a.data()) == raw->load(i, b.data()));
    CHECK(a == b);
  }
}

TEST_CASE("IDX: truncated pixel data names the file and the byte counts", "[data][idx]") {
  TempFolder dir;
  std::vector<std::uint8_t> images = t::idx_images(10, 28, 28);
  images.resize(16 + 1000);
  t::write_bytes(dir / "labels", t::idx_labels(10, 10));

  SECTION("raw") {
    t::write_bytes(dir / "images", images);
    expect_error(dir / "images", dir / "labels", dir / "images", "truncated: expected 7840 bytes of pixels, found 1000");
  }
  SECTION("gzip") {
    t::write_gzip(dir / "images.gz", images);
    expect_error(dir / "images.gz", dir / "labels", dir / "images.gz", "truncated: expected 7840 bytes of pixels, found 1000");
  }
  SECTION("gzip stream cut short") {
    std::vector<std::uint8_t> gz = t::gzip_bytes(t::idx_images(10, 28, 28));
    gz.resize(gz.size() / 2);
    t::write_bytes(dir / "images.gz", gz);
    expect_error(dir / "images.gz", dir / "labels", dir / "images.gz", "gzip");
  }
  SECTION("gzip with a bad checksum") {
    std::vector<std::uint8_t> gz = t::gzip_bytes(t::idx_images(10, 28, 28));
    gz[gz.size() - 6] ^= 0xFF;
    t::write_bytes(dir / "images.gz", gz);
    expect_error(dir / "images.gz", dir / "labels", dir / "images.gz", "gzip");
  }
  SECTION("header only") {
    t::write_bytes(dir / "images", {0, 0, 8, 3, 0, 0});
    expect_error(dir / "images", dir / "labels", dir / "images", "truncated header");
  }
  SECTION("empty file") {
    t::write_bytes(dir / "images", {});
    expect_error(dir / "images", dir / "labels", dir / "images", "truncated");
  }
}

TEST_CASE("IDX: trailing bytes are an error", "[data][idx]") {
  TempFolder dir;
  std::vector<std::uint8_t> labels = t::idx_labels(10, 10);
  labels.push_back(7);
  t::write_bytes(dir / "images", t::idx_images(10, 2, 2));
  t::write_bytes(dir / "labels", labels);
  expect_error(dir / "images", dir / "labels", dir / "labels", "trailing data: expected 10 bytes of labels, found 11");
}

TEST_CASE("IDX: wrong magic and wrong dimension count", "[data][idx]") {
  TempFolder dir;
  t::write_bytes(dir / "labels", t::idx_labels(4, 2));
  SECTION("labels given as images") {
    t::write_bytes(dir / "images", t::idx_labels(4, 2));
    expect_error(dir / "images", dir / "labels", dir / "images", "wrong dimension count: expected 3");
  }
  SECTION("not IDX at all") {
    t::write_bytes(dir / "images", {'P', 'K', 3, 4, 0, 0, 0, 0});
    expect_error(dir / "images", dir / "labels", dir / "images", "bad magic number: expected 0x00000803");
  }
  SECTION("images given as labels") {
    t::write_bytes(dir / "images", t::idx_images(4, 2, 2));
    expect_error(dir / "images", dir / "images", dir / "images", "expected 1 (magic 0x00000801)");
  }
}

TEST_CASE("IDX: label count mismatch", "[data][idx]") {
  TempFolder dir;
  t::write_bytes(dir / "images", t::idx_images(10, 2, 2));
  t::write_bytes(dir / "labels", t::idx_labels(9, 3));
  expect_error(dir / "images", dir / "labels", dir / "labels", "expected 10 labels");
}

TEST_CASE("IDX: label values out of range or a single class", "[data][idx]") {
  TempFolder dir;
  t::write_bytes(dir / "images", t::idx_images(10, 2, 2));
  SECTION("against a given class count") {
    t::write_bytes(dir / "labels", t::idx_labels(10, 5));
    try {
      open_idx(dir / "images", dir / "labels", 4);
      FAIL("expected a DataError");
    } catch (const DataError& e) {
      std::string what = e.what();
      CHECK(what.find(full_path(dir / "labels")) != std::string::npos);
      CHECK(what.find("label out of range at record 4: expected < 4, found 4") != std::string::npos);
    }
  }
  SECTION("every label the same") {
    t::write_bytes(dir / "labels", t::idx_labels(10, 1));
    expect_error(dir / "images", dir / "labels", dir / "labels", "at least 2 classes");
  }
}

TEST_CASE("IDX: a class without a training sample means a corrupt label, not more classes", "[data][idx]") {
  TempFolder dir;
  t::write_bytes(dir / "images", t::idx_images(10, 2, 2));
  SECTION("one label of 200 among 0..2") {
    std::vector<std::uint8_t> labels = {0, 1, 2, 0, 1, 2, 200, 0, 1, 2};
    t::write_bytes(dir / "labels", t::idx_bytes({10}, labels));
    expect_error(dir / "images", dir / "labels", dir / "labels",
                 "the largest label, 200 at record 6, makes 201 classes, but classes 3, 4, 5");
    expect_error(dir / "images", dir / "labels", dir / "labels", "and 187 more have no training sample");
  }
  SECTION("every label 255") {
    t::write_bytes(dir / "labels", t::idx_bytes({10}, std::vector<std::uint8_t>(10, 255)));
    expect_error(dir / "images", dir / "labels", dir / "labels", "makes 256 classes, but classes 0, 1,");
  }
  SECTION("one missing class in the middle") {
    t::write_bytes(dir / "labels", t::idx_bytes({10}, {0, 2, 3, 0, 2, 3, 0, 2, 3, 0}));
    expect_error(dir / "images", dir / "labels", dir / "labels", "but class 1 has no training sample");
  }
  SECTION("a test set may lack classes: its count comes from the training set") {
    t::write_bytes(dir / "labels", t::idx_bytes({10}, std::vector<std::uint8_t>(10, 3)));
    CHECK(open_idx(dir / "images", dir / "labels", 5)->num_classes() == 5);
  }
}

TEST_CASE("IDX: a FIFO is refused, not opened (open() would block forever)", "[data][idx]") {
  TempFolder dir;
  t::write_bytes(dir / "labels", t::idx_labels(4, 2));
  REQUIRE(::mkfifo((dir / "images").c_str(), 0600) == 0);
  expect_error(dir / "images", dir / "labels", dir / "images", "is a FIFO (named pipe), not a regular file");
}

TEST_CASE("IDX: zero and absurd dimensions", "[data][idx]") {
  TempFolder dir;
  t::write_bytes(dir / "labels", t::idx_labels(4, 2));
  SECTION("zero width") {
    t::write_bytes(dir / "images", t::idx_bytes({4, 2, 0}, {}));
    expect_error(dir / "images", dir / "labels", dir / "images", "dimension 2 is 0");
  }
  SECTION("zero images") {
    t::write_bytes(dir / "images", t::idx_bytes({0, 2, 2}, {}));
    expect_error(dir / "images", dir / "labels", dir / "images", "dimension 0 is 0");
  }
  SECTION("a header claiming terabytes") {
    t::write_bytes(dir / "images", t::idx_bytes({0x7FFFFFFF, 0x7FFFFFFF, 2}, {1, 2, 3}));
    expect_error(dir / "images", dir / "labels", dir / "images", "images");
  }
}

TEST_CASE("IDX: missing files and folders", "[data][idx]") {
  TempFolder dir;
  t::write_bytes(dir / "labels", t::idx_labels(4, 2));
  expect_error(dir / "nope", dir / "labels", dir / "nope", "does not exist");
  expect_error(dir.path(), dir / "labels", dir.path(), "is a folder");
}

TEST_CASE("IDX: the real Fashion-MNIST", "[data][idx][fashion]") {
  const std::filesystem::path root = CNN_FASHION_MNIST_DIR;
  if (!std::filesystem::exists(root / "train-images-idx3-ubyte.gz")) {
    WARN("Fashion-MNIST not installed at " << root << ": skipped");
    return;
  }
  auto train = open_idx(root / "train-images-idx3-ubyte.gz", root / "train-labels-idx1-ubyte.gz");
  auto test = open_idx(root / "t10k-images-idx3-ubyte.gz", root / "t10k-labels-idx1-ubyte.gz");
  CHECK(train->size() == 60000);
  CHECK(test->size() == 10000);
  CHECK(train->shape() == SampleShape{1, 28, 28});
  CHECK(train->num_classes() == 10);
  CHECK(test->num_classes() == 10);
  CHECK(train->host_bytes() == 60000 * 785);
  std::vector<float> image(784);
  float lo = 1, hi = 0;
  std::vector<int> per_class(10);
  for (std::size_t i = 0; i < train->size(); i += 97) {
    int label = train->load(i, image.data());
    REQUIRE(label >= 0);
    REQUIRE(label < 10);
    ++per_class[static_cast<std::size_t>(label)];
    auto [mn, mx] = std::minmax_element(image.begin(), image.end());
    lo = std::min(lo, *mn);
    hi = std::max(hi, *mx);
  }
  CHECK(lo == 0.0f);
  CHECK(hi == 1.0f);
  for (int count : per_class) CHECK(count > 0);
}
