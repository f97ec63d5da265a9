// IDX files built to hurt: headers that declare far more than the file holds, gzip bombs,
// bytes after the gzip stream. Each is refused quickly with a DataError, before the memory
// the header asks for is taken.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "data/data_error.hpp"
#include "data/detail/idx_file.hpp"
#include "data/idx_dataset.hpp"
#include "data_test_files.hpp"

using namespace cnn::data;
using cnn::data::test::TempFolder;
namespace t = cnn::data::test;
namespace fs = std::filesystem;

namespace {

std::string idx_error(const fs::path& path, int rank) {
  try {
    read_idx(path, rank, rank == 3 ? "pixels" : "labels");
  } catch (const DataError& e) {
    return e.what();
  }
  FAIL("expected a DataError for " << path);
  return {};
}

void check_words(const std::string& what, const std::vector<std::string>& words) {
  INFO(what);
  for (const std::string& w : words) CHECK(what.find(w) != std::string::npos);
}

}  // namespace

TEST_CASE("IDX hostile: a gzip file declaring 2^31-1 images is refused at once", "[data][idx][hostile]") {
  TempFolder dir;
  // 1 MB on disk, 160 MiB inflated, 1.7 TB declared.
  const std::size_t zeros = std::size_t{160} << 20;
  t::write_bytes(dir / "images.gz", t::gzip_with_zeros(t::idx_bytes({0x7FFFFFFF, 28, 28}, {}), zeros));
  const std::uintmax_t on_disk = fs::file_size(dir / "images.gz");
  REQUIRE(on_disk < (std::uintmax_t{2} << 20));

  const long rss_before = t::peak_rss_mib();
  const auto start = std::chrono::steady_clock::now();
  const std::string what = idx_error(dir / "images.gz", 3);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  check_words(what, {full_path(dir / "images.gz"), "the header declares 2147483647x28x28 pixels (1683627179248 bytes)",
                     "limit of 4 GiB", std::to_string(on_disk) + " bytes gzip-compressed"});
  CHECK(seconds < 1.0);
  CHECK(t::peak_rss_mib() - rss_before < 200);
}

TEST_CASE("IDX hostile: declared sizes are checked against the file before reading", "[data][idx][hostile]") {
  TempFolder dir;
  SECTION("raw: over the limit") {
    t::write_bytes(dir / "images", t::idx_bytes({0x7FFFFFFF, 28, 28}, std::vector<std::uint8_t>(1000)));
    check_words(idx_error(dir / "images", 3),
                {full_path(dir / "images"), "declares 2147483647x28x28 pixels", "limit of 4 GiB", "the file holds 1016 bytes"});
  }
  SECTION("raw: under the limit, more than the file holds") {
    t::write_bytes(dir / "images", t::idx_bytes({100000, 100, 100}, std::vector<std::uint8_t>(1000)));
    check_words(idx_error(dir / "images", 3),
                {full_path(dir / "images"), "truncated: expected 1000000000 bytes of pixels, found 1000",
                 "the header declares 100000x100x100"});
  }
  SECTION("gzip: more than deflate can expand the file to") {
    t::write_bytes(dir / "images.gz", t::gzip_with_zeros(t::idx_bytes({1000, 100, 100}, {}), 100));
    const std::string on_disk = std::to_string(fs::file_size(dir / "images.gz"));
    check_words(idx_error(dir / "images.gz", 3),
                {full_path(dir / "images.gz"), "declares 1000x100x100 pixels (10000000 bytes)",
                 "more than " + on_disk + " bytes gzip-compressed can hold"});
  }
  SECTION("labels too") {
    t::write_gzip(dir / "labels.gz", t::idx_bytes({0xFFFFFFF, }, {1, 2, 3}));
    check_words(idx_error(dir / "labels.gz", 1), {full_path(dir / "labels.gz"), "declares 268435455 labels"});
  }
}

TEST_CASE("IDX hostile: a compressed file that really inflates to its declared size opens", "[data][idx][hostile]") {
  TempFolder dir;
  t::write_bytes(dir / "images.gz", t::gzip_with_zeros(t::idx_bytes({30, 100, 100}, {}), 300000));
  const IdxArray images = read_idx(dir / "images.gz", 3, "pixels");
  CHECK(images.dims == std::vector<std::uint32_t>{30, 100, 100});
  REQUIRE(images.data.size() == 300000);
  CHECK(images.data.front() == 0);
  CHECK(images.data.back() == 0);
}

TEST_CASE("IDX hostile: bytes after the gzip stream", "[data][idx][hostile]") {
  TempFolder dir;
  const std::vector<std::uint8_t> labels = t::idx_labels(10, 10);
  const fs::path file = dir / "labels.gz";
  auto gz = t::gzip_bytes(labels);
  SECTION("garbage is refused") {
    gz.insert(gz.end(), {'j', 'u', 'n', 'k'});
    t::write_bytes(file, gz);
    check_words(idx_error(file, 1), {full_path(file), "4 bytes of trailing garbage after the gzip stream"});
  }
  SECTION("zero padding is refused") {
    gz.insert(gz.end(), 512, 0);
    t::write_bytes(file, gz);
    check_words(idx_error(file, 1), {full_path(file), "512 bytes of trailing garbage after the gzip stream"});
  }
  SECTION("a second gzip member is read on: concatenated members are one gzip file (RFC 1952)") {
    const std::vector<std::uint8_t> head(labels.begin(), labels.begin() + 11), tail(labels.begin() + 11, labels.end());
    gz = t::gzip_bytes(head);
    const auto second = t::gzip_bytes(tail);
    gz.insert(gz.end(), second.begin(), second.end());
    t::write_bytes(file, gz);
    CHECK(read_idx(file, 1, "labels").data == std::vector<std::uint8_t>(labels.begin() + 8, labels.end()));
    SECTION("and garbage after it is refused") {
      gz.insert(gz.end(), {0x1f});
      t::write_bytes(file, gz);
      check_words(idx_error(file, 1), {full_path(file), "1 byte of trailing garbage after the gzip stream"});
    }
  }
}
