// Segmentation folders: images/ with masks/ beside them, opened by open_dataset.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <cnnengine/base/error.hpp>
#include <cnnengine/base/task.hpp>
#include "data/data_error.hpp"
#include <cnnengine/data/dataset.hpp>
#include "data/segmentation_dataset.hpp"
#include "data_test_files.hpp"
#include "task_test_folders.hpp"

using namespace cnn::data;
using cnn::Task;
using cnn::data::test::TempFolder;
namespace t = cnn::data::test;
namespace fs = std::filesystem;

namespace {

std::vector<std::uint8_t> target_of(const Dataset& data, std::size_t index) {
  std::vector<std::uint8_t> mask(data.target_bytes());
  data.load_target(index, mask.data());
  return mask;
}

std::vector<float> image_of(const Dataset& data, std::size_t index) {
  std::vector<float> image(data.shape().elements());
  CHECK(data.load(index, image.data()) == 0);
  return image;
}

ImageFolderOptions held_or_not(bool held) {
  ImageFolderOptions options;
  if (!held) options.eager_decode_limit = 0;
  return options;
}

}  // namespace

TEST_CASE("segmentation folder: images and masks, classes from the train masks", "[data][task_data]") {
  TempFolder dir;
  t::write_segmentation_folder(dir.path());
  const bool held = GENERATE(true, false);
  INFO((held ? "held decoded" : "decoded on load"));
  DatasetSplits splits = open_dataset(dir.path(), SampleShape{0, 0, 0}, 1, held_or_not(held));
  CHECK(splits.kind == "segmentation");
  REQUIRE(splits.train->size() == 3);
  REQUIRE(splits.test->size() == 2);
  CHECK(splits.validation == nullptr);
  for (const Dataset* side : {splits.train.get(), splits.test.get()}) {
    CHECK(side->task() == Task::segment);
    CHECK(side->shape() == SampleShape{3, 2, 4});
    CHECK(side->num_classes() == 3);
    CHECK(side->class_names() == std::vector<std::string>{"0", "1", "2"});
    CHECK(side->target_bytes() == 8);
  }
  CHECK((splits.train->description().find("decoded on load") != std::string::npos) == !held);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(target_of(*splits.train, i) == t::segmentation_mask(static_cast<int>(i)));
    CHECK(splits.train->label(i) == 0);
    const std::vector<float> image = image_of(*splits.train, i);
    const std::vector<std::uint8_t> ramp = t::rgb_ramp(4, 2, static_cast<int>(i));
    for (int c = 0; c < 3; ++c)
      for (int p = 0; p < 8; ++p)  // CHW from HWC
        CHECK(image[static_cast<std::size_t>(c * 8 + p)] * 255 == Approx(ramp[static_cast<std::size_t>(p * 3 + c)]));
  }
  CHECK(target_of(*splits.test, 1) == t::segmentation_mask(4));
  // Every image and mask is a file the data set reads.
  CHECK(splits.files.size() == 10);
  CHECK(std::count(splits.files.begin(), splits.files.end(), dir / "test" / "masks" / "e.png") == 1);
  CHECK_THROWS_AS(splits.train->load_target(3, target_of(*splits.train, 0).data()), DataError);
}

TEST_CASE("segmentation folder: classes.txt names the classes, val/ beside train/ and test/", "[data][task_data]") {
  TempFolder dir;
  t::write_segmentation_folder(dir.path());
  t::write_pair(dir / "val", "v", 4, 2, 7, std::vector<std::uint8_t>(8, 3));
  t::write_text(dir / "classes.txt", "road\nsky\ncar\nperson\n");
  DatasetSplits splits = open_dataset(dir.path());
  const std::vector<std::string> names{"road", "sky", "car", "person"};
  CHECK(splits.train->class_names() == names);
  CHECK(splits.test->class_names() == names);
  REQUIRE(splits.validation);
  CHECK(splits.validation->task() == Task::segment);
  CHECK(splits.validation->class_names() == names);
  CHECK(target_of(*splits.validation, 0) == std::vector<std::uint8_t>(8, 3));
  CHECK(std::count(splits.files.begin(), splits.files.end(), dir / "classes.txt") == 1);
  CHECK(std::count(splits.files.begin(), splits.files.end(), dir / "val" / "masks" / "v.png") == 1);

  SECTION("a mask value beyond classes.txt's names is refused, naming the mask and the value") {
    t::write_text(dir / "classes.txt", "road\nsky\n");
    t::expect_data_error([&] { open_dataset(dir.path()); }, dir / "train" / "masks" / "a.png",
                         {"value 2 at x=2, y=0 is not a class", "0..1", "255"});
  }
  SECTION("one class name is too few") {
    t::write_text(dir / "classes.txt", "road\n");
    t::expect_data_error([&] { open_dataset(dir.path()); }, dir / "classes.txt", {"2 to 255 classes"});
  }
  SECTION("a val/ of another layout") {
    fs::remove_all(dir / "val" / "masks");
    t::expect_data_error([&] { open_dataset(dir.path()); }, dir / "val", {"images/ and masks/"});
  }
}

TEST_CASE("segmentation folder: a test mask beyond the classes of the train masks is refused", "[data][task_data]") {
  TempFolder dir;
  t::write_segmentation_folder(dir.path());
  std::vector<std::uint8_t> mask(8, 1);
  mask[5] = 7;
  t::write_pair(dir / "test", "d", 4, 2, 3, mask);
  t::expect_data_error([&] { open_dataset(dir.path()); }, dir / "test" / "masks" / "d.png",
                       {"value 7 at x=1, y=1 is not a class", "0..2 (the 3 classes)"});
}

TEST_CASE("segmentation folder: masks are resized by nearest neighbour", "[data][task_data]") {
  TempFolder dir;
  t::write_segmentation_folder(dir.path());
  const bool held = GENERATE(true, false);
  DatasetSplits splits = open_dataset(dir.path(), SampleShape{1, 4, 8}, 1, held_or_not(held));
  CHECK(splits.train->shape() == SampleShape{1, 4, 8});
  CHECK(splits.train->target_bytes() == 32);
  CHECK(splits.test->shape() == SampleShape{1, 4, 8});
  for (std::size_t i = 0; i < 3; ++i) {
    const std::vector<std::uint8_t> source = t::segmentation_mask(static_cast<int>(i));
    const std::vector<std::uint8_t> mask = target_of(*splits.train, i);
    for (int y = 0; y < 4; ++y)
      for (int x = 0; x < 8; ++x)  // each source pixel becomes a 2x2 block, no value between
        CHECK(mask[static_cast<std::size_t>(y * 8 + x)] == source[static_cast<std::size_t>(y / 2 * 4 + x / 2)]);
  }
  SECTION("and shrunk: every kept value is a source pixel's") {
    DatasetSplits small = open_dataset(dir.path(), SampleShape{3, 1, 3}, 1, held_or_not(held));
    const std::vector<std::uint8_t> source = t::segmentation_mask(1);
    // x from floor(x * 4 / 3): 0, 1, 2; y from floor(0 * 2 / 1): 0.
    CHECK(target_of(*small.train, 1) == std::vector<std::uint8_t>{source[0], source[1], source[2]});
  }
}

TEST_CASE("segmentation folder: every fault is a DataError naming the file", "[data][task_data]") {
  TempFolder dir;
  t::write_segmentation_folder(dir.path());
  auto open = [&] { open_dataset(dir.path()); };
  const fs::path train = dir / "train";

  SECTION("an image without a mask") {
    t::write_image(train / "images" / "f.png", 4, 2, 3, t::rgb_ramp(4, 2, 9));
    t::expect_data_error(open, train / "images" / "f.png", {"an image without a mask", "masks/f.png"});
  }
  SECTION("a mask without an image") {
    t::write_image(train / "masks" / "g.png", 4, 2, 1, std::vector<std::uint8_t>(8, 0));
    t::expect_data_error(open, train / "masks" / "g.png", {"a mask without an image"});
  }
  SECTION("a mask of another size than its image") {
    t::write_image(train / "masks" / "b.png", 3, 2, 1, std::vector<std::uint8_t>(6, 0));
    t::expect_data_error(open, train / "masks" / "b.png", {"the mask is 3x2", "4x2", "its image's size"});
  }
  SECTION("a colour mask") {
    t::write_image(train / "masks" / "b.png", 4, 2, 3, std::vector<std::uint8_t>(24, 1));
    t::expect_data_error(open, train / "masks" / "b.png", {"8-bit RGB colour PNG", "8-bit greyscale PNG"});
  }
  SECTION("a mask of 4 bits a pixel") {
    t::write_bytes(train / "masks" / "b.png", t::grey_png(4, 2, 4, false, std::vector<std::uint8_t>(8, 1)));
    t::expect_data_error(open, train / "masks" / "b.png", {"4-bit greyscale PNG"});
  }
  SECTION("a mask that is not a PNG") {
    t::write_image(train / "masks" / "b.bmp", 4, 2, 1, std::vector<std::uint8_t>(8, 0));
    t::expect_data_error(open, train / "masks" / "b.bmp", {"not a PNG file"});
  }
  SECTION("a BMP named .png") {
    t::write_image(train / "masks" / "x.bmp", 4, 2, 1, std::vector<std::uint8_t>(8, 0));
    fs::rename(train / "masks" / "x.bmp", train / "masks" / "b.png");
    t::expect_data_error(open, train / "masks" / "b.png", {"not a PNG"});
  }
  SECTION("a truncated mask") {
    std::vector<std::uint8_t> bytes = t::read_bytes(train / "masks" / "c.png");
    bytes.resize(bytes.size() - 20);
    t::write_bytes(train / "masks" / "c.png", bytes);
    t::expect_data_error(open, train / "masks" / "c.png", {"corrupt"});
  }
  SECTION("a truncated image") {
    std::vector<std::uint8_t> bytes = t::read_bytes(train / "images" / "c.png");
    bytes.resize(bytes.size() - 20);
    t::write_bytes(train / "images" / "c.png", bytes);
    t::expect_data_error(open, train / "images" / "c.png", {"corrupt"});
  }
  SECTION("two images of one name") {
    t::write_image(train / "images" / "a.jpg", 4, 2, 3, t::rgb_ramp(4, 2, 0));
    t::expect_data_error(open, train / "images" / "a.png", {"two images cannot share one"});
  }
  SECTION("a file that is not an image in images/") {
    t::write_text(train / "images" / "notes.txt", "hello");
    t::expect_data_error(open, train / "images" / "notes.txt", {"not an image file"});
  }
  SECTION("masks with no class") {
    for (const char* name : {"a", "b", "c"})
      t::write_image(train / "masks" / (std::string(name) + ".png"), 4, 2, 1, std::vector<std::uint8_t>(8, 255));
    t::expect_data_error(open, train / "masks", {"no class in any mask"});
  }
  SECTION("masks of class 0 alone") {
    for (const char* name : {"a", "b", "c"})
      t::write_image(train / "masks" / (std::string(name) + ".png"), 4, 2, 1, std::vector<std::uint8_t>(8, 0));
    t::expect_data_error(open, train / "masks", {"at least 2 classes", "classes.txt"});
  }
  SECTION("no test/ beside train/") {
    fs::remove_all(dir / "test");
    t::expect_data_error(open, dir.path(), {"found train/ holding images/ and masks/", "no test/"});
  }
  SECTION("masks/ and labels.csv both beside images/") {
    t::write_text(train / "labels.csv", "file,x\na.png,1\n");
    t::expect_data_error(open, train, {"both masks/ and labels.csv"});
  }
  SECTION("masks/ that is a file, or a loop of links: named as what it is, not as a missing train/") {
    fs::remove_all(train / "masks");
    t::write_text(train / "masks", "not a folder\n");
    t::expect_data_error(open, train / "masks", {"is not a folder"});
    fs::remove(train / "masks");
    fs::create_symlink("masks", train / "masks");
    t::expect_data_error(open, train / "masks", {"cannot be read as the folder of masks"});
  }
}

TEST_CASE("segmentation folder: a mask changed after open is refused on load", "[data][task_data]") {
  TempFolder dir;
  t::write_segmentation_folder(dir.path());
  DatasetSplits splits = open_dataset(dir.path(), {}, 1, held_or_not(false));
  std::vector<std::uint8_t> mask(8, 0);
  mask[3] = 40;
  t::write_image(dir / "train" / "masks" / "b.png", 4, 2, 1, mask);
  t::expect_data_error([&] { target_of(*splits.train, 1); }, dir / "train" / "masks" / "b.png", {"value 40"});
}

TEST_CASE("segmentation folder: skip_corrupt leaves out the pair", "[data][task_data]") {
  TempFolder dir;
  t::write_segmentation_folder(dir.path());
  std::vector<std::uint8_t> bytes = t::read_bytes(dir / "train" / "masks" / "b.png");
  bytes.resize(bytes.size() / 2);
  t::write_bytes(dir / "train" / "masks" / "b.png", bytes);
  ImageFolderOptions options = held_or_not(GENERATE(true, false));
  options.skip_corrupt = true;
  std::vector<std::string> warnings;
  options.on_skipped = [&](const std::string& w) { warnings.push_back(w); };
  DatasetSplits splits = open_dataset(dir.path(), {}, 1, options);
  REQUIRE(splits.train->size() == 2);
  CHECK(target_of(*splits.train, 0) == t::segmentation_mask(0));
  CHECK(target_of(*splits.train, 1) == t::segmentation_mask(2));  // c, after the skipped b
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find(full_path(dir / "train" / "masks" / "b.png")) != std::string::npos);
  CHECK(splits.train->description().find("1 unreadable pair skipped") != std::string::npos);
}
