// The loader and the parts of a data set (validation split, first samples, other class names)
// with the tasks beyond classification: targets carried beside the images, masks moved with them.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include <cnnengine/base/batch.hpp>
#include <cnnengine/base/error.hpp>
#include <cnnengine/base/task.hpp>
#include "data/data_error.hpp"
#include <cnnengine/data/dataset.hpp>
#include "data/detail/augment.hpp"
#include "data/detail/resize.hpp"
#include <cnnengine/data/loader.hpp>
#include "memory/buffer.hpp"
#include "memory/host_resource.hpp"

using namespace cnn::data;
using cnn::Task;

namespace {

constexpr int kH = 3, kW = 4, kClasses = 5;

// Sample i is a 1 x 3 x 4 image whose pixel p is ((i + p) % kClasses + 1) / 255; its mask's pixel p
// is (i + p) % kClasses, the image's value less one, or, for the other tasks, its targets are
// (i, i + 0.5) (regression) or (i % 2, 1 - i % 2) (multi-label). bad_at: the sample whose mask
// holds a value beyond the classes.
class FakeTaskDataset final : public Dataset {
 public:
  FakeTaskDataset(Task task, std::size_t n, std::size_t bad_at = SIZE_MAX) : task_(task), n_(n), bad_at_(bad_at) {}
  std::size_t size() const override { return n_; }
  SampleShape shape() const override { return {1, kH, kW}; }
  Task task() const override { return task_; }
  int num_classes() const override { return task_ == Task::segment ? kClasses : 2; }
  std::vector<std::string> class_names() const override {
    if (task_ == Task::segment) return {"0", "1", "2", "3", "4"};
    return {"x", "y"};
  }
  std::string description() const override { return "fake " + cnn::to_string(task_); }
  std::size_t host_bytes() const override { return 0; }
  int load(std::size_t index, float* out) const override {
    for (int p = 0; p < kH * kW; ++p) out[p] = static_cast<float>((index + p) % kClasses + 1) / 255.0f;
    return 0;
  }
  void load_target(std::size_t index, void* out) const override {
    if (task_ == Task::segment) {
      auto* mask = static_cast<std::uint8_t*>(out);
      for (int p = 0; p < kH * kW; ++p) mask[p] = static_cast<std::uint8_t>((index + p) % kClasses);
      if (index == bad_at_) mask[7] = 9;
      return;
    }
    auto* values = static_cast<float*>(out);
    if (task_ == Task::regress) {
      values[0] = static_cast<float>(index);
      values[1] = static_cast<float>(index) + 0.5f;
    } else {
      values[0] = static_cast<float>(index % 2);
      values[1] = static_cast<float>(1 - index % 2);
    }
  }

 private:
  Task task_;
  std::size_t n_, bad_at_;
};

}  // namespace

TEST_CASE("loader: regression and multi-label targets ride beside the images, labels are null", "[data][task_data]") {
  const Task task = GENERATE(Task::regress, Task::multilabel);
  FakeTaskDataset data(task, 11);
  CHECK(data.target_bytes() == 2 * sizeof(float));
  LoaderOptions options;
  options.batch = 4;
  options.augment_flip = true;
  options.augment_crop_padding = 1;
  Loader loader(data, options, cnn::memory::host_resource());
  std::multiset<float> firsts;
  loader.start_epoch(0);
  std::size_t samples = 0;
  while (auto batch = loader.next()) {
    CHECK(batch->labels == nullptr);
    REQUIRE(batch->targets != nullptr);
    const auto* targets = static_cast<const float*>(batch->targets);
    for (int s = 0; s < batch->size; ++s) {
      const float* t = targets + 2 * s;
      if (task == Task::regress) {
        CHECK(t[1] == t[0] + 0.5f);  // as the data set wrote them, augmentation or not
        firsts.insert(t[0]);
      } else {
        CHECK(t[0] + t[1] == 1.0f);
        CHECK((t[0] == 0.0f || t[0] == 1.0f));
      }
      ++samples;
    }
  }
  CHECK(samples == 11);
  if (task == Task::regress) {
    std::multiset<float> all;
    for (int i = 0; i < 11; ++i) all.insert(static_cast<float>(i));
    CHECK(firsts == all);  // every sample once, each with its own targets
  }
}

TEST_CASE("loader: a mask moves with its image under flip and crop, padded with kIgnoreMask", "[data][task_data]") {
  FakeTaskDataset data(Task::segment, 23);
  CHECK(data.target_bytes() == kH * kW);
  LoaderOptions options;
  options.batch = 5;
  options.augment_flip = true;
  options.augment_crop_padding = GENERATE(0, 1, 2);
  Loader loader(data, options, cnn::memory::host_resource());
  int flipped = 0, kept = 0, padded = 0;
  for (int epoch = 0; epoch < 2; ++epoch) {
    loader.start_epoch(epoch);
    while (auto batch = loader.next()) {
      CHECK(batch->labels == nullptr);
      REQUIRE(batch->targets != nullptr);
      const auto* masks = static_cast<const std::uint8_t*>(batch->targets);
      for (int s = 0; s < batch->size; ++s) {
        const float* image = batch->images + s * kH * kW;
        const std::uint8_t* mask = masks + s * kH * kW;
        for (int p = 0; p < kH * kW; ++p) {
          const int value = static_cast<int>(image[p] * 255.0f + 0.5f);
          if (mask[p] == cnn::kIgnoreMask) {
            CHECK(value == 0);  // the crop's padding, in both
            ++padded;
          } else {
            CHECK(value == mask[p] + 1);  // the pixel the mask's value came with
          }
        }
        // A row's classes count up from left to right (mod kClasses), or down once mirrored.
        for (int p = 0; p + 1 < kH * kW; ++p) {
          if ((p + 1) % kW == 0 || mask[p] == cnn::kIgnoreMask || mask[p + 1] == cnn::kIgnoreMask) continue;
          const int step = (mask[p + 1] - mask[p] + kClasses) % kClasses;
          CHECK((step == 1 || step == kClasses - 1));
          (step == 1 ? kept : flipped) += 1;
          break;
        }
      }
    }
  }
  CHECK(flipped > 0);
  CHECK(kept > 0);
  CHECK((padded > 0) == (options.augment_crop_padding > 0));
}

TEST_CASE("loader: staging holds the targets in the same block, counted before", "[data][task_data]") {
  LoaderOptions options;
  options.batch = 6;
  options.prefetch = 2;
  using cnn::memory::align_up;
  using cnn::memory::kDefaultAlignment;
  const std::size_t images = align_up(6 * kH * kW * sizeof(float), kDefaultAlignment);
  FakeTaskDataset segment(Task::segment, 10), regress(Task::regress, 10);
  CHECK(Loader::staging_bytes_for(segment, options) == 3 * (images + align_up(6 * kH * kW, kDefaultAlignment)));
  CHECK(Loader::staging_bytes_for(regress, options) == 3 * (images + align_up(6 * 2 * sizeof(float), kDefaultAlignment)));
  Loader loader(regress, options, cnn::memory::host_resource());
  CHECK(loader.staging_bytes() == Loader::staging_bytes_for(regress, options));
  auto batch = loader.next();
  REQUIRE(batch);
  // The targets sit after the images in the slot's memory.
  const auto* images_begin = reinterpret_cast<const unsigned char*>(batch->images);
  CHECK(static_cast<const unsigned char*>(batch->targets) == images_begin + images);
}

TEST_CASE("loader: a mask value beyond the classes is a DataError", "[data][task_data]") {
  FakeTaskDataset data(Task::segment, 8, 5);
  LoaderOptions options;
  options.batch = 8;
  options.shuffle = false;
  Loader loader(data, options, cnn::memory::host_resource());
  try {
    loader.next();
    FAIL("expected a DataError");
  } catch (const cnn::DataError& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("fake segment: sample 5's target holds the value 9 at pixel 7") != std::string::npos);
    CHECK(what.find("expected 0..4 or 255") != std::string::npos);
  }
}

TEST_CASE("validation split and first samples keep the task and the targets", "[data][task_data]") {
  FakeTaskDataset data(Task::regress, 30);
  ValidationSplit split = split_for_validation(data, 0.2, 7);
  REQUIRE(split.validation->size() == 6);
  REQUIRE(split.train->size() == 24);
  std::set<float> seen;
  for (const Dataset* side : {split.train.get(), split.validation.get()}) {
    CHECK(side->task() == Task::regress);
    CHECK(side->target_bytes() == 2 * sizeof(float));
    float last = -1;
    for (std::size_t i = 0; i < side->size(); ++i) {
      float t[2];
      side->load_target(i, t);
      CHECK(t[0] > last);  // the data's order
      last = t[0];
      seen.insert(t[0]);
    }
  }
  CHECK(seen.size() == 30);  // disjoint, together all
  // The same seed gives the same split; another, another.
  auto held_out = [&](std::uint64_t seed) {
    ValidationSplit s = split_for_validation(data, 0.2, seed);
    std::vector<float> firsts;
    for (std::size_t i = 0; i < s.validation->size(); ++i) {
      float t[2];
      s.validation->load_target(i, t);
      firsts.push_back(t[0]);
    }
    return firsts;
  };
  CHECK(held_out(7) == held_out(7));
  CHECK(held_out(7) != held_out(8));
  CHECK(split.validation->description().find("per class") == std::string::npos);

  std::unique_ptr<Dataset> first = first_samples(*split.train, 3);
  CHECK(first->task() == Task::regress);
  float t[2];
  first->load_target(2, t);
  float expected[2];
  split.train->load_target(2, expected);
  CHECK(t[0] == expected[0]);

  SECTION("other class names keep them too") {
    auto segment = std::make_unique<FakeTaskDataset>(Task::segment, 4);
    std::unique_ptr<Dataset> named = with_class_names(std::move(segment), {"a", "b", "c", "d", "e"});
    CHECK(named->task() == Task::segment);
    std::vector<std::uint8_t> mask(kH * kW);
    named->load_target(1, mask.data());
    CHECK(mask[0] == 1);
    CHECK(mask[4] == 0);
  }
  SECTION("a split that leaves a side empty is refused") {
    FakeTaskDataset one(Task::multilabel, 1);
    CHECK_THROWS_AS(split_for_validation(one, 0.5, 1), cnn::ConfigError);
  }
}

TEST_CASE("augment: a mask flips and shifts as its image, padding kIgnoreMask", "[data][task_data]") {
  // 2 x 3: 0 1 2 / 3 4 5
  std::vector<std::uint8_t> mask{0, 1, 2, 3, 4, 5}, scratch(6);
  apply_augment_mask(mask.data(), 2, 3, {true, 0, 0}, scratch.data());
  CHECK(mask == std::vector<std::uint8_t>{2, 1, 0, 5, 4, 3});
  mask = {0, 1, 2, 3, 4, 5};
  apply_augment_mask(mask.data(), 2, 3, {false, 1, 1}, scratch.data());
  CHECK(mask == std::vector<std::uint8_t>{4, 5, 255, 255, 255, 255});
  mask = {0, 1, 2, 3, 4, 5};
  apply_augment_mask(mask.data(), 2, 3, {true, -1, 0}, scratch.data());
  CHECK(mask == std::vector<std::uint8_t>{255, 255, 255, 2, 1, 0});
}

TEST_CASE("resize: nearest neighbour takes source pixels, never a blend", "[data][task_data]") {
  const std::vector<std::uint8_t> src{0, 10, 20, 30, 40, 50};  // 2 x 3
  std::vector<std::uint8_t> up(4 * 6);
  resize_nearest(src.data(), 2, 3, up.data(), 4, 6);
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 6; ++x) CHECK(up[static_cast<std::size_t>(y * 6 + x)] == src[static_cast<std::size_t>(y / 2 * 3 + x / 2)]);
  std::vector<std::uint8_t> down(2);
  resize_nearest(src.data(), 2, 3, down.data(), 1, 2);  // x from floor(x * 3 / 2): 0, 1
  CHECK(down == std::vector<std::uint8_t>{0, 10});
}
