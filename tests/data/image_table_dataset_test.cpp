// Multi-label and regression folders: images/ with labels.csv beside them, opened by open_dataset.
#include <catch2/catch.hpp>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <cnnengine/base/error.hpp>
#include <cnnengine/base/task.hpp>
#include "data/data_error.hpp"
#include <cnnengine/data/dataset.hpp>
#include "data_test_files.hpp"
#include "task_test_folders.hpp"

using namespace cnn::data;
using cnn::Task;
using cnn::data::test::TempFolder;
namespace t = cnn::data::test;
namespace fs = std::filesystem;

namespace {

std::vector<float> target_of(const Dataset& data, std::size_t index) {
  std::vector<float> values(static_cast<std::size_t>(data.num_classes()));
  REQUIRE(data.target_bytes() == values.size() * sizeof(float));
  data.load_target(index, values.data());
  return values;
}

// train/: a.png, b.png and park/c.png; test/: d.png. 3x2 RGB images.
void write_images(const fs::path& root) {
  t::write_image(root / "train" / "images" / "a.png", 3, 2, 3, t::rgb_ramp(3, 2, 0));
  t::write_image(root / "train" / "images" / "b.png", 3, 2, 3, t::rgb_ramp(3, 2, 1));
  t::write_image(root / "train" / "images" / "park" / "c.png", 3, 2, 3, t::rgb_ramp(3, 2, 2));
  t::write_image(root / "test" / "images" / "d.png", 3, 2, 3, t::rgb_ramp(3, 2, 3));
}

void write_tables(const fs::path& root, const std::string& train, const std::string& test) {
  t::write_text(root / "train" / "labels.csv", train);
  t::write_text(root / "test" / "labels.csv", test);
}

DatasetSplits open_as(const fs::path& folder, std::optional<Task> task) {
  return open_dataset(folder, {}, 1, {}, task);
}

void expect_config_error(const fs::path& folder, std::optional<Task> task, const std::vector<std::string>& words) {
  try {
    open_as(folder, task);
    FAIL("expected a ConfigError");
  } catch (const cnn::ConfigError& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find(full_path(folder)) != std::string::npos);
    for (const std::string& w : words) CHECK(what.find(w) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("labels.csv folder: 0s and 1s are a multi-label data set", "[data][task_data]") {
  TempFolder dir;
  write_images(dir.path());
  // Rows in any order, a path under images/, CRLF line ends, a byte order mark, a quoted field.
  write_tables(dir.path(),
               "\xEF\xBB\xBF" "file,cat,\"dog, big\"\r\nb.png,0,1\r\n\r\npark/c.png , 1 , 1\r\n\"a.png\",1,0\r\n",
               "file,cat,\"dog, big\"\nd.png,0,0\n");
  const bool held = GENERATE(true, false);
  ImageFolderOptions options;
  if (!held) options.eager_decode_limit = 0;
  DatasetSplits splits = open_dataset(dir.path(), SampleShape{0, 0, 0}, 1, options);
  CHECK(splits.kind == "multilabel");
  for (const Dataset* side : {splits.train.get(), splits.test.get()}) {
    CHECK(side->task() == Task::multilabel);
    CHECK(side->class_names() == std::vector<std::string>{"cat", "dog, big"});
    CHECK(side->shape() == SampleShape{3, 2, 3});
  }
  REQUIRE(splits.train->size() == 3);
  CHECK(target_of(*splits.train, 0) == std::vector<float>{0, 1});  // the rows' order: b, park/c, a
  CHECK(target_of(*splits.train, 1) == std::vector<float>{1, 1});
  CHECK(target_of(*splits.train, 2) == std::vector<float>{1, 0});
  std::vector<float> image(splits.train->shape().elements());
  CHECK(splits.train->load(1, image.data()) == 0);
  CHECK(image[1] * 255 == Approx(t::rgb_ramp(3, 2, 2)[3]));  // park/c.png's pixel (0, 1), red
  CHECK(target_of(*splits.test, 0) == std::vector<float>{0, 0});
  CHECK(std::count(splits.files.begin(), splits.files.end(), dir / "train" / "labels.csv") == 1);
  CHECK(std::count(splits.files.begin(), splits.files.end(), dir / "train" / "images" / "park" / "c.png") == 1);
  CHECK(splits.files.size() == 6);
}

TEST_CASE("labels.csv folder: the test side has the train side's header", "[data][task_data]") {
  TempFolder dir;
  write_images(dir.path());
  write_tables(dir.path(), "file,cat,\"dog, big\"\na.png,0,1\nb.png,0,1\npark/c.png,1,1\n",
               "file,cat,dog, big\nd.png,0,0\n");
  t::expect_data_error([&] { open_dataset(dir.path()); }, dir / "test" / "labels.csv",
                       {"line 1: the header 'file,cat,dog,big' differs from the training set's", "'file,cat,dog, big'"});
}

TEST_CASE("labels.csv folder: other numbers are a regression, and the task asked for decides", "[data][task_data]") {
  TempFolder dir;
  write_images(dir.path());
  write_tables(dir.path(), "file,age,height\na.png,30,1.5\nb.png,+4.25,-2e-1\npark/c.png,0,1\n",
               "file,age,height\nd.png,0,1\n");
  DatasetSplits splits = open_as(dir.path(), std::nullopt);
  CHECK(splits.kind == "regression");
  CHECK(splits.train->task() == Task::regress);
  CHECK(splits.test->task() == Task::regress);  // all 0 or 1, yet the train side's task
  CHECK(target_of(*splits.train, 1) == std::vector<float>{4.25f, -0.2f});
  CHECK(open_as(dir.path(), Task::regress).kind == "regression");
  t::expect_data_error([&] { open_as(dir.path(), Task::multilabel); }, dir / "train" / "labels.csv",
                       {"line 2, column 'age'", "the value 30 is not a label", "0 or 1"});
  expect_config_error(dir.path(), Task::classify, {"asked for the task classify", "multi-label or regression"});
  expect_config_error(dir.path(), Task::segment, {"asked for the task segment", "images/ and masks/"});

  SECTION("0s and 1s asked to be a regression are one") {
    write_tables(dir.path(), "file,x\na.png,0\nb.png,1\npark/c.png,1\n", "file,x\nd.png,0\n");
    CHECK(open_as(dir.path(), std::nullopt).kind == "multilabel");
    DatasetSplits regression = open_as(dir.path(), Task::regress);
    CHECK(regression.kind == "regression");
    CHECK(regression.train->task() == Task::regress);
  }
  SECTION("a test side of a multi-label holds 0s and 1s only") {
    write_tables(dir.path(), "file,x\na.png,0\nb.png,1\npark/c.png,1\n", "file,x\nd.png,0.5\n");
    t::expect_data_error([&] { open_as(dir.path(), std::nullopt); }, dir / "test" / "labels.csv",
                         {"line 2, column 'x'", "0.5 is not a label"});
  }
}

TEST_CASE("open_dataset: a task the folder does not hold is a ConfigError saying what it holds", "[data][task_data]") {
  TempFolder dir;
  SECTION("class folders") {
    for (const char* side : {"train", "test"})
      for (const char* cls : {"cat", "dog"})
        t::write_image(dir / side / cls / "1.png", 2, 2, 1, t::flat_pixels(2, 2, {9}));
    expect_config_error(dir.path(), Task::segment,
                        {"asked for the task segment", "class folders", "images/ and masks/"});
    CHECK(open_as(dir.path(), Task::classify).kind == "image-folder");
  }
  SECTION("IDX files") {
    t::write_bytes(dir / "train-images-idx3-ubyte", t::idx_images(4, 2, 2));
    t::write_bytes(dir / "train-labels-idx1-ubyte", t::idx_labels(4, 2));
    t::write_bytes(dir / "t10k-images-idx3-ubyte", t::idx_images(2, 2, 2));
    t::write_bytes(dir / "t10k-labels-idx1-ubyte", t::idx_labels(2, 2));
    expect_config_error(dir.path(), Task::regress, {"IDX files", "images/ and labels.csv"});
  }
  SECTION("a segmentation") {
    t::write_segmentation_folder(dir.path());
    expect_config_error(dir.path(), Task::multilabel, {"a segmentation data set", "labels.csv"});
    CHECK(open_as(dir.path(), Task::segment).kind == "segmentation");
  }
}

TEST_CASE("labels.csv folder: every fault is a DataError naming the file, line and column", "[data][task_data]") {
  TempFolder dir;
  write_images(dir.path());
  const fs::path csv = dir / "train" / "labels.csv";
  auto expect = [&](const std::string& table, const std::vector<std::string>& words, fs::path named = {}) {
    write_tables(dir.path(), table, "file,x,y\nd.png,0,1\n");
    t::expect_data_error([&] { open_dataset(dir.path()); }, named.empty() ? csv : named, words);
  };
  const std::string rows_bc = "b.png,1,0\npark/c.png,0,1\n";
  SECTION("a row naming no image") {
    expect("file,x,y\na.png,1,0\n" + rows_bc + "e.png,0,0\n", {"line 5 names 'e.png'", "not an image under"});
  }
  SECTION("a row naming an image by a path outside images/") {
    expect("file,x,y\n../images/a.png,1,0\n" + rows_bc, {"line 2 names '../images/a.png'"});
  }
  SECTION("an image without a row") {
    expect("file,x,y\n" + rows_bc, {"an image without a row"}, dir / "train" / "images" / "a.png");
  }
  SECTION("not a number") {
    expect("file,x,y\na.png,1,yes\n" + rows_bc, {"line 2, column 'y'", "'yes' is not a number"});
  }
  SECTION("an empty value") {
    expect("file,x,y\na.png,1,\n" + rows_bc, {"line 2, column 'y'", "'' is not a number"});
  }
  SECTION("NaN, infinity, beyond a float") {
    const std::string value = GENERATE(std::string("nan"), std::string("inf"), std::string("-Infinity"),
                                       std::string("1e39"));
    expect("file,x,y\na.png,1,0\nb.png,1," + value + "\npark/c.png,0,1\n", {"line 3, column 'y'", "not a finite number"});
  }
  SECTION("a row of the wrong count of fields") {
    expect("file,x,y\na.png,1,0,1\n" + rows_bc, {"line 2 has 4 fields, the header 3"});
    expect("file,x,y\na.png,1\n" + rows_bc, {"line 2 has 2 fields, the header 3"});
  }
  SECTION("a file twice") {
    expect("file,x,y\na.png,1,0\n" + rows_bc + "./a.png,0,0\n", {"line 5 names the file './a.png' of line 2 again"});
  }
  SECTION("an empty name, a name twice, a header not starting with file") {
    expect("file,x,\na.png,1,0\n" + rows_bc, {"line 1, column 3: an empty name"});
    expect("file,x,x\na.png,1,0\n" + rows_bc, {"line 1, column 3 repeats the name 'x' of column 2"});
    expect("image,x,y\na.png,1,0\n" + rows_bc, {"expected the header 'file,<name>", "found 'image'"});
    expect("file\na.png\n", {"no label or target after 'file'"});
  }
  SECTION("quotes: a field left open, a quote inside a field, text after one") {
    expect("file,x,y\n\"a.png,1,0\n" + rows_bc, {"line 2: a quoted field does not end on its line"});
    expect("file,x,y\na\"b.png,1,0\n" + rows_bc, {"line 2, field 1: a double quote inside"});
    expect("file,x,y\n\"a.png\"x,1,0\n" + rows_bc, {"line 2, field 1: text after the closing quote"});
  }
  SECTION("no rows, an empty file") {
    expect("file,x,y\n\n", {"no rows after the header"});
    expect("", {"empty: expected the header"});
  }
  SECTION("a line over 1 MiB, a header of too many columns: refused before they are read whole") {
    expect("file,x,y\na.png,1," + std::string(2 << 20, '0') + "\n" + rows_bc, {"line 2 is longer than 1 MiB"});
    std::string wide = "file";
    for (int c = 0; c < 70000; ++c) wide += "," + std::to_string(c);
    expect(wide + "\n" + rows_bc, {"line 1: 70000 labels or targets, over the limit of 65536"});
    expect(std::string(3 << 20, 'f'), {"line 1 is longer than 1 MiB"});
  }
  SECTION("a long bad value or header is quoted cut, not whole") {
    try {
      write_tables(dir.path(), "file,x,y\na.png,1," + std::string(100000, 'z') + "\n" + rows_bc, "file,x,y\nd.png,0,1\n");
      open_dataset(dir.path());
      FAIL("expected a DataError");
    } catch (const cnn::DataError& e) {
      CHECK(std::string(e.what()).size() < 1000);
      CHECK(std::string(e.what()).find("... (100000 bytes)") != std::string::npos);
    }
  }
  SECTION("a labels.csv that is a folder") {
    fs::remove(csv);
    fs::create_directories(csv);
    t::write_text(dir / "test" / "labels.csv", "file,x\nd.png,1\n");
    t::expect_data_error([&] { open_dataset(dir.path()); }, csv, {});
  }
}
