// A saved file loads into a ready network without its architecture being known: the same
// outputs as the trainer that saved it, and image files preprocessed as recorded.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include <cnnengine/data/dataset.hpp>
#include "memory/host_resource.hpp"
#include <cnnengine/models/model.hpp>
#include <cnnengine/models/network_text.hpp>
#include "tests/data/data_test_files.hpp"
#include "tests/engine/test_networks.hpp"

using namespace cnn;
namespace t = cnn::data::test;

namespace {

// An untrained `small` network of 1 x 8 x 8 images and three classes, saved to `file` with the
// network text `network` in its description instead of its own (none: its own).
void save_small_model(const std::filesystem::path& file, const std::string& network = "") {
  CpuBackend backend(1);
  Network net = make_preset("small", Shape{1, 8, 8}, 3);
  Trainer trainer(net, backend, memory::host_resource(), testing::constant_sgd(8));
  ModelDescription described = describe_model(net);
  if (!network.empty()) described.network = network;
  save_checkpoint(file, net, trainer.parameters(), described);
}

}  // namespace

TEST_CASE("a model loaded from its file gives the outputs of the trainer that saved it", "[models]") {
  t::TempFolder dir;
  const Shape image{3, 8, 8};
  CpuBackend backend(2);
  Network net = make_preset("small-bn", image, 3);
  Trainer trainer(net, backend, memory::host_resource(), testing::constant_sgd(8));
  const testing::SyntheticData data(24, image, 3, 5);
  for (int s = 0; s < 2; ++s) trainer.train_step(data.batch(s * 8, 8));
  ModelDescription described = describe_model(net);
  described.class_names = {"red", "green", "blue"};
  described.preprocessing.normalization = {{0.5f}, {0.25f}};
  save_checkpoint(dir / "m.ckpt", net, trainer.parameters(), described);

  Model model(dir / "m.ckpt", backend);
  CHECK(model.classes() == 3);
  CHECK(model.class_name(2) == "blue");
  CHECK(model.network().summary() == net.summary());
  const std::vector<float> expected =
      testing::trainer_outputs(net, backend, trainer, data.images.data() + 16 * image.elements(), 8);
  CHECK(model.logits(data.images.data() + 16 * image.elements(), 8) == expected);

  // Planned for inference alone: no gradients, no optimizer state, a forward-only arena.
  CHECK(model.memory().persistent[memory::Category::parameter_gradients] == 0);
  CHECK(model.memory().persistent[memory::Category::optimizer_state] == 0);
  CHECK(model.micro_batch() == 256);

  const std::vector<float> p = model.probabilities(data.images.data() + 16 * image.elements(), 8);
  for (int i = 0; i < 8; ++i) CHECK(std::accumulate(p.begin() + 3 * i, p.begin() + 3 * i + 3, 0.0f) == Approx(1.0f));

  // An image file of another size and channel count: converted, resized, normalised as recorded.
  t::write_image(dir / "photo.png", 20, 12, 1, std::vector<std::uint8_t>(240, 77));
  const std::vector<float> input = data::preprocess_image(dir / "photo.png", described.preprocessing);
  CHECK(input.size() == image.elements());
  CHECK(input[0] == Approx((77.0f / 255.0f - 0.5f) / 0.25f));
  CHECK(model.classify(dir / "photo.png") == model.probabilities(input.data(), 1));
}

TEST_CASE("a weights-only file of version 1 has no network to load", "[models]") {
  t::TempFolder dir;
  std::vector<std::uint8_t> v1(28, 0);
  std::memcpy(v1.data(), "CNNWEIGH", 8);
  v1[8] = 1;  // version 1, no floats
  const std::uint32_t crc = t::crc32({});
  std::memcpy(v1.data() + 24, &crc, 4);
  t::write_bytes(dir / "old.bin", v1);
  CpuBackend backend(1);
  CHECK_THROWS_WITH(Model(dir / "old.bin", backend), Catch::Contains("with no network"));
}

TEST_CASE("a model file whose network text was altered is refused before its memory is taken", "[models]") {
  t::TempFolder dir;
  // A few bytes that ask for 136 billion floats (507 GiB) of parameters: before the check, the
  // trainer was built first and this was an out-of-memory failure, not the file named.
  save_small_model(dir / "altered.ckpt", "flatten\ndense 2000000000\ndense 3\n");
  CpuBackend backend(1);
  try {
    Model model(dir / "altered.ckpt", backend);
    FAIL("an altered model file was loaded");
  } catch (const CheckpointError& e) {
    CHECK_THAT(e.what(), Catch::Contains("its network has 136000000016 parameters but the file holds"));
    CHECK_THAT(e.what(), Catch::Contains("corrupt or was altered"));
  }
}

TEST_CASE("a model evaluates as the trainer that saved it, to the bit", "[models]") {
  t::TempFolder dir;
  const Shape image{1, 8, 8};
  CpuBackend backend(2);
  Network net = make_preset("small-bn", image, 3);
  Trainer trainer(net, backend, memory::host_resource(), testing::constant_sgd(8));
  const testing::SyntheticData data(40, image, 3, 9);
  for (int s = 0; s < 2; ++s) trainer.train_step(data.batch(s * 8, 8));
  save_checkpoint(dir / "m.ckpt", net, trainer.parameters(), describe_model(net));
  auto batches = [&] {
    return [&, next = 16]() mutable -> std::optional<Batch> {
      if (next >= 40) return std::nullopt;
      const Batch b = data.batch(next, std::min(8, 40 - next));
      next += 8;
      return b;
    };
  };
  ModelOptions options;
  options.max_batch = 8;  // the trainer's micro-batch
  Model model(dir / "m.ckpt", backend, options);
  const ClassEvaluation want = trainer.evaluate_classes(batches());
  const ClassEvaluation have = model.evaluate(batches());
  CHECK(have.samples == 24);
  CHECK(have.loss == want.loss);
  CHECK(have.accuracy == want.accuracy);
  CHECK(have.confusion == want.confusion);
  // At the same micro-batch, far less than the trainer reserved.
  CHECK(model.micro_batch() == trainer.micro_batch());
  CHECK(model.memory().arena_bytes < trainer.memory().arena_bytes);
  CHECK(model.memory().total() < trainer.memory().total());
}

TEST_CASE("a model under a budget too small for one image's inference is refused with its table", "[models][budget]") {
  t::TempFolder dir;
  save_small_model(dir / "m.ckpt");
  CpuBackend backend(1);
  ModelOptions options;
  options.memory_budget = 4096;
  try {
    Model model(dir / "m.ckpt", backend, options);
    FAIL("a budget of 4 KiB held a model");
  } catch (const BudgetTooSmall& e) {
    CHECK_THAT(e.what(), Catch::Contains("inference even for one image"));
    CHECK_THAT(e.what(), Catch::Contains("inference plan for micro-batch 1"));
  }
}

TEST_CASE("Model refuses a batch limit below one and softmax rows of no classes", "[models]") {
  t::TempFolder dir;
  save_small_model(dir / "m.ckpt");
  CpuBackend backend(1);
  ModelOptions none;
  none.max_batch = 0;
  CHECK_THROWS_WITH(Model(dir / "m.ckpt", backend, none), Catch::Contains("max_batch must be positive, got 0"));
  Model model(dir / "m.ckpt", backend);
  CHECK_THROWS_AS(model.logits(nullptr, -2), ConfigError);
  CHECK_THROWS_WITH(model.logits(nullptr, 2), Catch::Contains("without images"));
  std::vector<float> values{1.f, 2.f};
  CHECK_THROWS_AS(softmax_rows(values, 0), ConfigError);
}
