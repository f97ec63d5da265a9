#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <cnnengine/base/error.hpp>
#include "data/data_error.hpp"
#include <cnnengine/data/dataset.hpp>
#include "data_test_files.hpp"
#include "expect_open_error.hpp"

using namespace cnn::data;
using cnn::data::test::TempFolder;
namespace t = cnn::data::test;
namespace fs = std::filesystem;

namespace {

// The first pixel, as a byte: the tests below give every image its own.
int first_byte(const Dataset& data, std::size_t index) {
  std::vector<float> out(data.shape().elements());
  data.load(index, out.data());
  return static_cast<int>(out[0] * 255 + 0.5f);
}

// Classes "cat" (12 images) and "dog" (7), each image flat grey with a distinct value.
void write_class_folders(const fs::path& root) {
  for (int i = 0; i < 12; ++i) t::write_image(root / "cat" / (std::to_string(i) + ".png"), 3, 3, 1, t::flat_pixels(3, 3, {static_cast<std::uint8_t>(i)}));
  for (int i = 0; i < 7; ++i) t::write_image(root / "dog" / (std::to_string(i) + ".png"), 3, 3, 1, t::flat_pixels(3, 3, {static_cast<std::uint8_t>(100 + i)}));
}

std::set<int> values(const Dataset& data) {
  std::set<int> seen;
  for (std::size_t i = 0; i < data.size(); ++i) seen.insert(first_byte(data, i));
  return seen;
}

}  // namespace

TEST_CASE("open_dataset: IDX folders, gzip or raw, t10k or test names", "[data][open]") {
  TempFolder dir;
  const bool gz = GENERATE(false, true);
  const std::string test_prefix = GENERATE(std::string("t10k"), std::string("test"));
  auto write = [&](const std::string& name, const std::vector<std::uint8_t>& bytes) {
    if (gz) t::write_gzip(dir / (name + ".gz"), bytes);
    else t::write_bytes(dir / name, bytes);
  };
  write("train-images-idx3-ubyte", t::idx_images(30, 5, 5));
  write("train-labels-idx1-ubyte", t::idx_labels(30, 4));
  write(test_prefix + "-images-idx3-ubyte", t::idx_images(8, 5, 5));
  write(test_prefix + "-labels-idx1-ubyte", t::idx_labels(8, 3));  // fewer classes than train: fine
  DatasetSplits splits = open_dataset(dir.path());
  CHECK(splits.kind == "idx");
  CHECK(splits.train->size() == 30);
  CHECK(splits.test->size() == 8);
  CHECK(splits.test->num_classes() == 4);
  CHECK(splits.test->shape() == SampleShape{1, 5, 5});
}

TEST_CASE("open_dataset: IDX files take their class names from classes.txt beside them", "[data][open]") {
  TempFolder dir;
  t::write_bytes(dir / "train-images-idx3-ubyte", t::idx_images(12, 4, 4));
  t::write_bytes(dir / "train-labels-idx1-ubyte", t::idx_labels(12, 3));
  t::write_bytes(dir / "t10k-images-idx3-ubyte", t::idx_images(3, 4, 4));
  t::write_bytes(dir / "t10k-labels-idx1-ubyte", t::idx_labels(3, 3));
  CHECK(open_dataset(dir.path()).train->class_names() == std::vector<std::string>{"0", "1", "2"});
  const std::string names = "T-shirt/top\nAnkle boot\nBag\n\n";
  t::write_bytes(dir / "classes.txt", std::vector<std::uint8_t>(names.begin(), names.end()));
  DatasetSplits splits = open_dataset(dir.path());
  const std::vector<std::string> expected{"T-shirt/top", "Ankle boot", "Bag"};
  CHECK(splits.train->class_names() == expected);
  CHECK(splits.test->class_names() == expected);
  CHECK(splits.train->label(4) == 1);
  CHECK(std::count(splits.files.begin(), splits.files.end(), dir / "classes.txt") == 1);
  const std::string two = "a\nb\n";
  t::write_bytes(dir / "classes.txt", std::vector<std::uint8_t>(two.begin(), two.end()));
  CHECK_THROWS_AS(open_dataset(dir.path()), DataError);
  CHECK_THROWS_WITH(open_dataset(dir.path()), Catch::Contains("classes.txt"));
  CHECK_THROWS_WITH(with_class_names(std::move(splits.train), {"x", "x", "y"}), Catch::Contains("repeated"));
  // A names file asked for must be there: missing, it is an error, not the numbers.
  fs::remove(dir / "classes.txt");
  DatasetSplits numbered = open_dataset(dir.path());
  CHECK_THROWS_WITH(name_classes(numbered, dir / "missing.txt"), Catch::Contains("missing.txt") &&
                                                                  Catch::Contains("does not exist"));
  t::write_bytes(dir / "two.txt", std::vector<std::uint8_t>(two.begin(), two.end()));
  CHECK_THROWS_WITH(name_classes(numbered, dir / "two.txt"), Catch::Contains("expected 3 class names"));
}

TEST_CASE("open_dataset: IDX errors", "[data][open]") {
  TempFolder dir;
  t::write_bytes(dir / "train-images-idx3-ubyte", t::idx_images(30, 5, 5));
  t::write_bytes(dir / "train-labels-idx1-ubyte", t::idx_labels(30, 4));
  SECTION("missing test files") {
    t::expect_open_error(dir.path(), dir.path(), "incomplete IDX data set: missing t10k-images-idx3-ubyte[.gz]");
  }
  SECTION("test labels beyond the training classes") {
    t::write_bytes(dir / "t10k-images-idx3-ubyte", t::idx_images(8, 5, 5));
    t::write_bytes(dir / "t10k-labels-idx1-ubyte", t::idx_labels(8, 6));
    t::expect_open_error(dir.path(), dir / "t10k-labels-idx1-ubyte", "label out of range at record 4: expected < 4, found 4");
  }
  SECTION("test images of another size") {
    t::write_bytes(dir / "t10k-images-idx3-ubyte", t::idx_images(8, 6, 5));
    t::write_bytes(dir / "t10k-labels-idx1-ubyte", t::idx_labels(8, 4));
    t::expect_open_error(dir.path(), dir / "t10k-images-idx3-ubyte", "expected 1x5x5, found 1x6x5");
  }
}

TEST_CASE("open_dataset: train/ and test/ folders", "[data][open]") {
  TempFolder dir;
  write_class_folders(dir / "train");
  t::write_image(dir / "test" / "cat" / "x.bmp", 8, 8, 3, t::flat_pixels(8, 8, {1, 2, 3}));
  t::write_image(dir / "test" / "dog" / "y.jpg", 5, 2, 1, t::flat_pixels(5, 2, {4}));
  SECTION("test takes the train shape") {
    DatasetSplits splits = open_dataset(dir.path(), SampleShape{3, 0, 0});
    CHECK(splits.kind == "image-folder");
    CHECK(splits.train->size() == 19);
    CHECK(splits.test->size() == 2);
    CHECK(splits.train->shape() == SampleShape{3, 3, 3});
    CHECK(splits.test->shape() == SampleShape{3, 3, 3});
  }
  SECTION("test classes must match") {
    t::write_image(dir / "test" / "emu" / "z.png", 2, 2, 1, t::flat_pixels(2, 2, {9}));
    t::expect_open_error(dir.path(), dir / "test", "class folders differ from train/: expected [cat, dog], found [cat, dog, emu]");
  }
  SECTION("train/ without test/") {
    fs::remove_all(dir / "test");
    t::expect_open_error(dir.path(), dir.path(), "found train/ but no test/");
  }
  SECTION("no val/: no validation set") { CHECK(open_dataset(dir.path()).validation == nullptr); }
  SECTION("val/ beside them is the validation set, in the train shape, its files counted") {
    t::write_image(dir / "val" / "cat" / "v.png", 4, 4, 1, t::flat_pixels(4, 4, {7}));
    t::write_image(dir / "val" / "dog" / "w.png", 4, 4, 1, t::flat_pixels(4, 4, {8}));
    DatasetSplits splits = open_dataset(dir.path());
    REQUIRE(splits.validation != nullptr);
    CHECK(splits.validation->size() == 2);
    CHECK(splits.validation->shape() == splits.train->shape());
    CHECK(std::count(splits.files.begin(), splits.files.end(), dir / "val" / "dog" / "w.png") == 1);
  }
  SECTION("val/ classes must match") {
    for (const char* name : {"cat", "dog", "emu"})
      t::write_image(dir / "val" / name / "v.png", 4, 4, 1, t::flat_pixels(4, 4, {7}));
    t::expect_open_error(dir.path(), dir / "val", "class folders differ from train/: expected [cat, dog], found [cat, dog, emu]");
  }
}

TEST_CASE("split_for_validation is stratified, seeded, disjoint and complete, and first_samples cuts", "[data][open]") {
  TempFolder dir;
  write_class_folders(dir.path());
  DatasetSplits all = open_dataset(dir.path() / "cat" / "..", {}, 1);  // 16 train: 10 cats, 6 dogs
  const Dataset& train = *all.train;
  REQUIRE(train.size() == 16);
  ValidationSplit a = split_for_validation(train, 0.25, 3);
  REQUIRE(a.validation->size() == 3 + 2);  // round(10/4) cats (2.5 rounds up), round(6/4) dogs
  CHECK(a.train->size() == 11);
  int dogs = 0;
  for (std::size_t i = 0; i < a.validation->size(); ++i) dogs += a.validation->label(i);
  CHECK(dogs == 2);
  std::set<int> kept = values(*a.train), held = values(*a.validation), together = kept;
  together.insert(held.begin(), held.end());
  CHECK(together == values(train));  // complete
  CHECK(kept.size() + held.size() == 16);  // disjoint
  CHECK(a.validation->description().find("validation split (0.25 per class, seed 3)") != std::string::npos);
  // The data's bytes shared out by sample count, and each side's index list.
  CHECK(a.train->host_bytes() + a.validation->host_bytes() == train.host_bytes() + 16 * sizeof(std::size_t));

  CHECK(values(*split_for_validation(train, 0.25, 3).validation) == held);  // the same seed, the same split
  bool any_other = false;
  for (std::uint64_t seed = 4; seed < 12 && !any_other; ++seed)
    any_other = values(*split_for_validation(train, 0.25, seed).validation) != held;
  CHECK(any_other);

  for (double bad : {0.0, 1.0, -0.1, 1.5}) CHECK_THROWS_AS(split_for_validation(train, bad, 1), cnn::ConfigError);
  CHECK_THROWS_WITH(split_for_validation(train, 2.0, 1), Catch::Contains("above 0 and below 1"));

  std::unique_ptr<Dataset> first = first_samples(train, 5);
  CHECK(first->size() == 5);
  CHECK(first_byte(*first, 4) == first_byte(train, 4));
  CHECK(first->description().rfind("first 5 of ", 0) == 0);
  CHECK(first_samples(train, 100)->size() == 16);
  CHECK_THROWS_AS(first->load(5, std::vector<float>(train.shape().elements()).data()), DataError);
}

TEST_CASE("open_dataset: one folder of classes gets a stratified, seeded 1/6 held out", "[data][open]") {
  TempFolder dir;
  write_class_folders(dir.path());
  DatasetSplits a = open_dataset(dir.path(), {}, 7);
  CHECK(a.kind == "image-folder");
  REQUIRE(a.test->size() == 2 + 1);  // round(12/6) cats, round(7/6) dogs
  REQUIRE(a.train->size() == 16);
  int test_dogs = 0;
  for (std::size_t i = 0; i < a.test->size(); ++i) test_dogs += a.test->label(i);
  CHECK(test_dogs == 1);

  std::set<int> train = values(*a.train), test = values(*a.test), all = train;
  all.insert(test.begin(), test.end());
  CHECK(all.size() == 19);  // disjoint and complete
  CHECK(a.train->host_bytes() + a.test->host_bytes() > 19 * 9);

  DatasetSplits same = open_dataset(dir.path(), {}, 7);
  CHECK(values(*same.test) == test);
  bool any_other = false;
  for (std::uint64_t seed = 8; seed < 16 && !any_other; ++seed) any_other = values(*open_dataset(dir.path(), {}, seed).test) != test;
  CHECK(any_other);
}

TEST_CASE("open_dataset: a class folder named train is just a class", "[data][open]") {
  TempFolder dir;
  t::write_image(dir / "train" / "1.png", 2, 2, 1, t::flat_pixels(2, 2, {1}));
  t::write_image(dir / "plane" / "1.png", 2, 2, 1, t::flat_pixels(2, 2, {2}));
  DatasetSplits splits = open_dataset(dir.path());
  CHECK(splits.train->class_names() == std::vector<std::string>{"plane", "train"});
}

TEST_CASE("open_dataset: nothing recognisable", "[data][open]") {
  TempFolder dir;
  SECTION("missing folder") { t::expect_open_error(dir / "absent", dir / "absent", "folder not found"); }
  SECTION("empty folder") { t::expect_open_error(dir.path(), dir.path(), "no data set found: looked for IDX files"); }
  SECTION("only stray files") {
    t::write_bytes(dir / "readme.md", {'x'});
    t::expect_open_error(dir.path(), dir.path(), "no data set found");
  }
}

TEST_CASE("open_dataset: the real Fashion-MNIST", "[data][open][fashion]") {
  const fs::path root = CNN_FASHION_MNIST_DIR;
  if (!fs::exists(root)) {
    WARN("Fashion-MNIST not installed at " << root << ": skipped");
    return;
  }
  DatasetSplits splits = open_dataset(root);
  CHECK(splits.kind == "idx");
  CHECK(splits.train->size() == 60000);
  CHECK(splits.test->size() == 10000);
  CHECK(splits.train->shape() == SampleShape{1, 28, 28});
  CHECK(splits.test->num_classes() == 10);
  CHECK(splits.train->description().find("60000 images 1x28x28, 10 classes") != std::string::npos);
  // Its files number the classes; the library names them, as the command line does, so that a
  // model a program saves is one train_images --evaluate takes.
  CHECK(splits.train->class_names() == fashion_mnist_classes());
  CHECK(splits.test->class_names().front() == "T-shirt/top");
}
