// CIFAR-10 and CIFAR-100 binary files, generated here (no copy of the real data set is reachable
// from the tests): samples, labels, class names, splits and files; then every way a folder or a
// file can be wrong, each a DataError naming the file.
#include <catch2/catch.hpp>
#include <cstdint>
#include <sys/stat.h>

#include <chrono>
#include <string>
#include <vector>

#include <cnnengine/base/error.hpp>
#include "cifar_test_files.hpp"
#include "data/cifar_dataset.hpp"
#include "data/cifar_folder.hpp"
#include "data/data_error.hpp"
#include <cnnengine/data/dataset.hpp>
#include "data_test_files.hpp"
#include "expect_open_error.hpp"

using namespace cnn::data;
using cnn::data::test::TempFolder;
namespace t = cnn::data::test;
namespace fs = std::filesystem;

namespace {

// Loads every sample of `data` and checks it is record `first + i` of cifar10_records.
void check_records(const Dataset& data, int first, int classes, int per_class_label(int)) {
  std::vector<float> out(data.shape().elements());
  for (std::size_t i = 0; i < data.size(); ++i) {
    const int g = first + static_cast<int>(i);
    INFO("sample " << i);
    REQUIRE(data.load(i, out.data()) == per_class_label(g));
    CHECK(data.label(i) == per_class_label(g));
    CHECK(data.label(i) < classes);
    bool same = true;
    for (std::size_t p = 0; p < out.size(); ++p) same = same && out[p] == t::cifar_pixel(g, p);
    CHECK(same);
  }
}

int cifar10_label(int g) { return g % 10; }
int fine_label(int g) { return g % 100; }
int coarse_label(int g) { return g % 100 / 5; }

std::vector<fs::path> cifar10_files(const fs::path& folder) {
  return {folder / "data_batch_1.bin", folder / "data_batch_2.bin", folder / "data_batch_3.bin",
          folder / "data_batch_4.bin", folder / "data_batch_5.bin", folder / "test_batch.bin",
          folder / "batches.meta.txt"};
}

}  // namespace

TEST_CASE("CIFAR-10: a folder opens as train and test splits of 3x32x32 images", "[data][cifar]") {
  TempFolder dir;
  const fs::path folder = dir / "cifar-10-batches-bin";
  t::write_cifar10_folder(folder, 3, 4);
  DatasetSplits splits = open_dataset(folder);
  CHECK(splits.kind == "cifar-10");
  CHECK(splits.files == cifar10_files(folder));
  REQUIRE(splits.train->size() == 15);  // 5 batches of 3, read in order
  REQUIRE(splits.test->size() == 4);
  for (const Dataset* data : {splits.train.get(), splits.test.get()}) {
    CHECK(data->shape() == SampleShape{3, 32, 32});
    CHECK(data->num_classes() == 10);
    CHECK(data->class_names() == t::cifar10_names());
  }
  check_records(*splits.train, 0, 10, cifar10_label);
  check_records(*splits.test, 1000, 10, cifar10_label);
  CHECK(splits.train->host_bytes() == 15 * 3073);
  CHECK(splits.train->description() == "CIFAR-10 " + full_path(folder / "data_batch_1.bin") +
                                           " .. data_batch_5.bin: 15 images 3x32x32, 10 classes");
  CHECK(splits.test->description() == "CIFAR-10 " + full_path(folder / "test_batch.bin") +
                                          ": 4 images 3x32x32, 10 classes");
  std::vector<float> out(3 * 32 * 32);
  CHECK_THROWS_AS(splits.train->load(15, out.data()), DataError);
  CHECK_THROWS_AS(splits.test->label(4), DataError);
}

TEST_CASE("CIFAR-10: the pixels are red, green, then blue planes, each row by row", "[data][cifar]") {
  TempFolder dir;
  std::vector<std::uint8_t> record = {7};
  for (std::uint8_t value : {10, 20, 30}) record.insert(record.end(), 1024, value);
  record[1 + 33] = 255;  // red, row 1, column 1
  t::write_file(dir / "one.bin", record);
  auto data = open_cifar10({dir / "one.bin"}, dir / "no_names.txt");
  std::vector<float> out(3 * 32 * 32);
  CHECK(data->load(0, out.data()) == 7);
  CHECK(out[0] == 10 * (1.0f / 255.0f));
  CHECK(out[33] == 1.0f);
  CHECK(out[1024] == 20 * (1.0f / 255.0f));
  CHECK(out[2047] == 20 * (1.0f / 255.0f));
  CHECK(out[2048] == 30 * (1.0f / 255.0f));
  CHECK(out[3071] == 30 * (1.0f / 255.0f));
}

TEST_CASE("CIFAR-10: found by its files, by the tarball's folder name, or as that folder's parent", "[data][cifar]") {
  TempFolder dir;
  SECTION("a folder of any name holding the files") {
    t::write_cifar10_folder(dir / "mine", 2, 2);
    CHECK(open_dataset(dir / "mine").kind == "cifar-10");
  }
  SECTION("the folder a tarball was unpacked into") {
    t::write_cifar10_folder(dir / "cifar-10-batches-bin", 2, 2);
    DatasetSplits splits = open_dataset(dir.path());
    CHECK(splits.kind == "cifar-10");
    CHECK(splits.files == cifar10_files(dir / "cifar-10-batches-bin"));
    CHECK(splits.train->size() == 10);
  }
  SECTION("given with a trailing slash, the folder's name still counts") {
    fs::create_directories(dir / "cifar-10-batches-bin");
    const fs::path given = (dir / "cifar-10-batches-bin").string() + "/";
    t::expect_open_error(given, given,
                 "incomplete CIFAR-10 data set: missing data_batch_1.bin, data_batch_2.bin, data_batch_3.bin, "
                 "data_batch_4.bin, data_batch_5.bin, test_batch.bin");
  }
}

TEST_CASE("CIFAR-10: class names are numbers without batches.meta.txt", "[data][cifar]") {
  TempFolder dir;
  t::write_cifar10_folder(dir.path(), 2, 2);
  fs::remove(dir / "batches.meta.txt");
  DatasetSplits splits = open_dataset(dir.path());
  CHECK(splits.train->class_names() == std::vector<std::string>{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"});
  CHECK(splits.files.size() == 6);
  CHECK(splits.files.back() == dir / "test_batch.bin");
}

TEST_CASE("CIFAR-100: fine labels by default, coarse on request", "[data][cifar]") {
  TempFolder dir;
  const fs::path folder = dir / "cifar-100-binary";
  t::write_cifar100_folder(folder, 120, 7);
  SECTION("fine") {
    DatasetSplits splits = open_dataset(dir.path());  // the parent: found by the sub-folder's name
    CHECK(splits.kind == "cifar-100");
    CHECK(splits.files == std::vector<fs::path>{folder / "train.bin", folder / "test.bin", folder / "fine_label_names.txt"});
    REQUIRE(splits.train->size() == 120);
    REQUIRE(splits.test->size() == 7);
    CHECK(splits.train->num_classes() == 100);
    CHECK(splits.test->num_classes() == 100);
    CHECK(splits.train->class_names()[42] == "fine42");
    CHECK(splits.train->shape() == SampleShape{3, 32, 32});
    CHECK(splits.train->host_bytes() == 120 * 3073);  // the coarse label is checked, not kept
    CHECK(splits.train->description() == "CIFAR-100 " + full_path(folder / "train.bin") +
                                             ": 120 images 3x32x32, 100 classes");
    check_records(*splits.train, 0, 100, fine_label);
    check_records(*splits.test, 1000, 100, fine_label);
  }
  SECTION("coarse") {
    DatasetSplits splits = open_cifar_folder(folder, CifarLabels::coarse);
    CHECK(splits.files.back() == folder / "coarse_label_names.txt");
    CHECK(splits.train->num_classes() == 20);
    CHECK(splits.train->class_names()[19] == "coarse19");
    CHECK(splits.train->description().find("CIFAR-100 (coarse labels) ") == 0);
    check_records(*splits.train, 0, 20, coarse_label);
  }
  SECTION("coarse labels do not apply to CIFAR-10") {
    t::write_cifar10_folder(dir / "ten", 1, 1);
    CHECK_THROWS_AS(open_cifar_folder(dir / "ten", CifarLabels::coarse), cnn::ConfigError);
  }
}

TEST_CASE("CIFAR: a file that is not a whole number of records names the record cut short", "[data][cifar]") {
  TempFolder dir;
  t::write_cifar10_folder(dir / "ten", 3, 2);
  t::write_cifar100_folder(dir / "hundred", 5, 2);
  SECTION("CIFAR-10") {
    std::vector<std::uint8_t> bytes = t::cifar10_records(3, 6);
    bytes.resize(2 * 3073 + 100);
    t::write_file(dir / "ten" / "data_batch_3.bin", bytes);
    t::expect_open_error(dir / "ten", dir / "ten" / "data_batch_3.bin",
                 "truncated: record 2 has 100 of its 3073 bytes; the file holds 6246 bytes, 2 whole records of 3073 "
                 "bytes (a label byte and 3072 pixel bytes) and part of one");
  }
  SECTION("CIFAR-100") {
    std::vector<std::uint8_t> bytes = t::cifar100_records(2, 1000);
    bytes.pop_back();
    t::write_file(dir / "hundred" / "test.bin", bytes);
    t::expect_open_error(dir / "hundred", dir / "hundred" / "test.bin",
                 "truncated: record 1 has 3073 of its 3074 bytes; the file holds 6147 bytes, 1 whole record of 3074 "
                 "bytes (a coarse label byte, a fine label byte and 3072 pixel bytes) and part of one");
  }
  SECTION("less than one record") {
    t::write_file(dir / "ten" / "test_batch.bin", {3, 1, 2});
    t::expect_open_error(dir / "ten", dir / "ten" / "test_batch.bin", "truncated: record 0 has 3 of its 3073 bytes");
  }
}

TEST_CASE("CIFAR: a label out of range names the record", "[data][cifar]") {
  TempFolder dir;
  t::write_cifar10_folder(dir / "ten", 3, 2);
  t::write_cifar100_folder(dir / "hundred", 5, 2);
  SECTION("CIFAR-10") {
    std::vector<std::uint8_t> bytes = t::cifar10_records(3, 3);
    bytes[3073] = 10;
    t::write_file(dir / "ten" / "data_batch_2.bin", bytes);
    t::expect_open_error(dir / "ten", dir / "ten" / "data_batch_2.bin",
                 "label out of range at record 1 (byte 3073): expected < 10, found 10");
  }
  SECTION("CIFAR-100 fine") {
    std::vector<std::uint8_t> bytes = t::cifar100_records(5);
    bytes[2 * 3074 + 1] = 100;
    t::write_file(dir / "hundred" / "train.bin", bytes);
    t::expect_open_error(dir / "hundred", dir / "hundred" / "train.bin",
                 "fine label out of range at record 2 (byte 6149): expected < 100, found 100");
  }
  SECTION("CIFAR-100 coarse, checked even when the fine labels are the classes") {
    std::vector<std::uint8_t> bytes = t::cifar100_records(5);
    bytes[4 * 3074] = 255;
    t::write_file(dir / "hundred" / "train.bin", bytes);
    t::expect_open_error(dir / "hundred", dir / "hundred" / "train.bin",
                 "coarse label out of range at record 4 (byte 12296): expected < 20, found 255");
  }
}

TEST_CASE("CIFAR: an empty file holds no records", "[data][cifar]") {
  TempFolder dir;
  t::write_cifar10_folder(dir.path(), 3, 2);
  t::write_file(dir / "test_batch.bin", {});
  t::expect_open_error(dir.path(), dir / "test_batch.bin",
               "holds no records: expected records of 3073 bytes (a label byte and 3072 pixel bytes)");
}

TEST_CASE("CIFAR: missing files are listed, and batches beyond data_batch_5.bin refused", "[data][cifar]") {
  TempFolder dir;
  t::write_cifar10_folder(dir / "ten", 1, 1);
  t::write_cifar100_folder(dir / "hundred", 1, 1);
  SECTION("training batches") {
    fs::remove(dir / "ten" / "data_batch_2.bin");
    fs::remove(dir / "ten" / "data_batch_4.bin");
    t::expect_open_error(dir / "ten", dir / "ten", "incomplete CIFAR-10 data set: missing data_batch_2.bin, data_batch_4.bin");
  }
  SECTION("the test batch") {
    fs::remove(dir / "ten" / "test_batch.bin");
    t::expect_open_error(dir / "ten", dir / "ten", "incomplete CIFAR-10 data set: missing test_batch.bin");
  }
  SECTION("a sixth batch") {
    t::write_file(dir / "ten" / "data_batch_6.bin", t::cifar10_records(1));
    t::expect_open_error(dir / "ten", dir / "ten",
                 "data_batch_6.bin is not part of CIFAR-10: its training set is data_batch_1.bin .. data_batch_5.bin");
  }
  SECTION("CIFAR-100's test file") {
    fs::remove(dir / "hundred" / "test.bin");
    t::expect_open_error(dir / "hundred", dir / "hundred", "incomplete CIFAR-100 data set: missing test.bin");
  }
  SECTION("files of both versions in one folder") {
    t::write_file(dir / "ten" / "train.bin", t::cifar100_records(1));
    t::expect_open_error(dir / "ten", dir / "ten", "holds files of both CIFAR-10");
  }
  SECTION("both tarballs' folders side by side") {
    fs::rename(dir / "ten", dir / "cifar-10-batches-bin");
    fs::rename(dir / "hundred", dir / "cifar-100-binary");
    t::expect_open_error(dir.path(), dir.path(),
                 "holds both cifar-10-batches-bin/ and cifar-100-binary/: give one of them as the data folder");
  }
  SECTION("open_cifar_folder on a folder that is no CIFAR data set") {
    fs::create_directories(dir / "other" / "cat");
    try {
      open_cifar_folder(dir / "other");
      FAIL("expected a DataError");
    } catch (const DataError& e) {
      CHECK_THAT(e.what(), Catch::Contains(full_path(dir / "other") + ": no CIFAR data set found"));
    }
  }
}

TEST_CASE("CIFAR: a names file with the wrong names", "[data][cifar]") {
  TempFolder dir;
  t::write_cifar10_folder(dir / "ten", 1, 1);
  t::write_cifar100_folder(dir / "hundred", 1, 1);
  const fs::path meta = dir / "ten" / "batches.meta.txt";
  SECTION("one name short") {
    t::write_text(meta, "airplane\nautomobile\nbird\ncat\ndeer\ndog\nfrog\nhorse\nship\n\n\n");
    t::expect_open_error(dir / "ten", meta, "expected 10 class names, one a line, found 9");
  }
  SECTION("CIFAR-100's fine names, one too many") {
    std::string names;
    for (int c = 0; c <= 100; ++c) names += "c" + std::to_string(c) + "\n";
    t::write_text(dir / "hundred" / "fine_label_names.txt", names);
    t::expect_open_error(dir / "hundred", dir / "hundred" / "fine_label_names.txt", "expected 100 class names, one a line, found 101");
  }
  SECTION("a blank line between names") {
    t::write_text(meta, "airplane\nautomobile\n\nbird\ncat\ndeer\ndog\nfrog\nhorse\nship\ntruck\n");
    t::expect_open_error(dir / "ten", meta, "line 3 is blank: expected one class name a line");
  }
  SECTION("a name twice") {
    t::write_text(meta, "airplane\nautomobile\nbird\ncat\nbird\ndog\nfrog\nhorse\nship\ntruck\n");
    t::expect_open_error(dir / "ten", meta, "line 5 repeats the class name 'bird' of line 3");
  }
  SECTION("not text") {
    t::write_file(meta, t::cifar10_records(1));
    t::expect_open_error(dir / "ten", meta, "holds a control character");
  }
  SECTION("spaces and Windows line ends are not part of a name") {
    t::write_text(meta, " airplane\r\nautomobile \r\nbird\r\ncat\r\ndeer\r\ndog\r\nfrog\r\nhorse\r\nship\r\ntruck");
    CHECK(open_dataset(dir / "ten").train->class_names() == t::cifar10_names());
  }
  SECTION("too large to be a list of names") {
    t::write_text(meta, std::string((1 << 20) + 1, 'x'));
    t::expect_open_error(dir / "ten", meta, "holds 1048577 bytes, over the limit of 1 MiB for a list of class names");
  }
}

TEST_CASE("CIFAR: a FIFO or a device is refused, not opened", "[data][cifar]") {
  TempFolder dir;
  t::write_cifar10_folder(dir.path(), 1, 1);
  SECTION("a FIFO as the test batch") {
    fs::remove(dir / "test_batch.bin");
    REQUIRE(::mkfifo((dir / "test_batch.bin").c_str(), 0600) == 0);
    t::expect_open_error(dir.path(), dir / "test_batch.bin", "is a FIFO (named pipe), not a regular file");
  }
  SECTION("a FIFO as the names file") {
    fs::remove(dir / "batches.meta.txt");
    REQUIRE(::mkfifo((dir / "batches.meta.txt").c_str(), 0600) == 0);
    t::expect_open_error(dir.path(), dir / "batches.meta.txt", "is a FIFO (named pipe), not a regular file");
  }
  SECTION("a link to /dev/zero as a training batch") {
    fs::remove(dir / "data_batch_4.bin");
    fs::create_symlink("/dev/zero", dir / "data_batch_4.bin");
    t::expect_open_error(dir.path(), dir / "data_batch_4.bin", "is a device, not a regular file");
  }
  SECTION("a broken link") {
    fs::remove(dir / "data_batch_1.bin");
    fs::create_symlink(dir / "nowhere.bin", dir / "data_batch_1.bin");
    t::expect_open_error(dir.path(), dir / "data_batch_1.bin", "is a broken symbolic link");
  }
}

TEST_CASE("CIFAR: a file over 4 GiB is refused at once, before anything is allocated", "[data][cifar][hostile]") {
  TempFolder dir;
  t::write_cifar10_folder(dir.path(), 1, 1);
  const std::uintmax_t size = (std::uintmax_t{5} << 30) - 2;  // 5 GiB, a sparse file: no disk taken
  fs::resize_file(dir / "data_batch_5.bin", size);
  const long rss_before = t::peak_rss_mib();
  const auto start = std::chrono::steady_clock::now();
  t::expect_open_error(dir.path(), dir / "data_batch_5.bin",
               "holds " + std::to_string(size) + " bytes, over the limit of 4 GiB for one CIFAR file");
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 1.0);
  CHECK(t::peak_rss_mib() - rss_before < 50);
}
