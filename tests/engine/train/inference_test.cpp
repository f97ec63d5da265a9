// A trainer's evaluation: its loss, accuracy and per-class counts agree with the network's
// outputs (a predictor on the trainer's parameters); and what it refuses.
#include <catch2/catch.hpp>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>

#include "backends/cpu/cpu_backend.hpp"
#include "layers/dense.hpp"
#include "memory/host_resource.hpp"
#include <cnnengine/memory/memory_stack.hpp>
#include <cnnengine/models/network_text.hpp>
#include "tests/engine/test_networks.hpp"

using namespace cnn;
using cnn::testing::SyntheticData;

TEST_CASE("evaluate scores the network's outputs, evaluate_classes adds the confusion matrix", "[trainer][inference]") {
  const Shape image{1, 12, 12};
  constexpr int kClasses = 4, kSamples = 40;
  CpuBackend backend(2);
  for (const char* model : {"small", "small-bn"}) {
    INFO(model);
    Network net = make_preset(model, image, kClasses);
    TrainerOptions o = testing::constant_sgd(16);
    Trainer trainer(net, backend, memory::host_resource(), o);
    const SyntheticData data(kSamples + 48, image, kClasses, 3);
    for (int s = 0; s < 3; ++s) trainer.train_step(data.batch(s * 16, 16));

    auto batches = [&] {
      return [&, next = 0]() mutable -> std::optional<Batch> {
        if (next == kSamples) return std::nullopt;
        const int size = std::min(16, kSamples - next);  // 16 + 16 + 8
        const Batch b = data.batch(48 + next, size);
        next += size;
        return b;
      };
    };
    const EvalResult plain = trainer.evaluate(batches());
    const ClassEvaluation classes = trainer.evaluate_classes(batches());
    CHECK(classes.samples == kSamples);
    CHECK(classes.loss == plain.loss);
    CHECK(classes.accuracy == plain.accuracy);

    const std::vector<float> logits =
        testing::trainer_outputs(net, backend, trainer, data.images.data() + 48 * image.elements(), kSamples);
    double loss = 0;
    std::size_t right = 0, total = 0;
    std::vector<std::vector<std::size_t>> confusion(kClasses, std::vector<std::size_t>(kClasses, 0));
    for (int i = 0; i < kSamples; ++i) {
      const float* row = logits.data() + i * kClasses;
      const int label = data.labels[static_cast<std::size_t>(48 + i)];
      const float top = *std::max_element(row, row + kClasses);
      double sum = 0;
      for (int c = 0; c < kClasses; ++c) sum += std::exp(static_cast<double>(row[c] - top));
      loss += std::log(sum) - (row[label] - top);
      const int predicted = static_cast<int>(std::max_element(row, row + kClasses) - row);
      right += predicted == label;
      ++confusion[static_cast<std::size_t>(label)][static_cast<std::size_t>(predicted)];
    }
    CHECK(loss / kSamples == Approx(plain.loss).epsilon(1e-5));
    CHECK(static_cast<double>(right) / kSamples == plain.accuracy);
    CHECK(confusion == classes.confusion);
    for (const auto& row : classes.confusion)
      for (std::size_t n : row) total += n;
    CHECK(total == kSamples);
    for (int c = 0; c < kClasses; ++c) {
      CHECK(classes.recall(c) >= 0.0);
      CHECK(classes.class_accuracy(c) >= classes.accuracy);  // one against the rest is easier
    }
  }
}

TEST_CASE("per-class precision, recall and accuracy from a known confusion matrix", "[inference]") {
  ClassEvaluation e;
  e.confusion = {{8, 2, 0}, {1, 6, 3}, {0, 0, 10}};  // rows: true class; 30 samples, 24 right
  CHECK(e.precision(0) == Approx(8.0 / 9.0));
  CHECK(e.recall(0) == Approx(0.8));
  CHECK(e.precision(2) == Approx(10.0 / 13.0));
  CHECK(e.recall(1) == Approx(0.6));
  CHECK(e.class_accuracy(1) == Approx((30.0 - 1 - 3 - 2) / 30.0));
}

TEST_CASE("a trainer refuses what it cannot run: bad pointers, NaN pixels, after finish, a changed network", "[trainer]") {
  const Shape image{1, 12, 12};
  CpuBackend backend(1);
  Network net = make_preset("small", image, 4);
  Trainer trainer(net, backend, memory::host_resource(), testing::constant_sgd(16));
  SyntheticData data(16, image, 4, 3);

  CHECK_THROWS_WITH(trainer.train_step(Batch{nullptr, data.labels.data(), 16}), Catch::Contains("without images"));
  CHECK_THROWS_WITH(trainer.train_step(Batch{data.images.data(), nullptr, 16}), Catch::Contains("without labels"));
  CHECK_THROWS_WITH(trainer.evaluate(NextBatch{}), Catch::Contains("empty NextBatch"));

  // One NaN pixel: refused before the step, the parameters as they were.
  const std::vector<float> before = trainer.parameters().download();
  data.images[5 * 144 + 17] = std::nanf("");
  try {
    trainer.train_step(data.batch(0, 16));
    FAIL("a NaN pixel was trained on");
  } catch (const DataError& e) {
    CHECK_THAT(e.what(), Catch::Contains("sample 5 of the batch holds a NaN (value 17)"));
  }
  CHECK(trainer.parameters().download() == before);
  data.images[5 * 144 + 17] = INFINITY;
  auto one_batch = [&, given = false]() mutable -> std::optional<Batch> {
    if (given) return std::nullopt;
    given = true;
    return data.batch(0, 16);
  };
  CHECK_THROWS_WITH(trainer.evaluate(one_batch), Catch::Contains("an infinity"));
  data.images[5 * 144 + 17] = 0.5f;
  CHECK(trainer.train_step(data.batch(0, 16)).samples == 16);

  SECTION("a layer added after the plan") {
    net.emplace<Dense>(4);
    CHECK_THROWS_WITH(trainer.train_step(data.batch(0, 16)), Catch::Contains("build a trainer for it"));
  }
  SECTION("after finish()") {
    trainer.finish();
    CHECK_THROWS_WITH(trainer.train_step(data.batch(0, 16)), Catch::Contains("this trainer has finished"));
    CHECK_THROWS_WITH(trainer.evaluate(one_batch), Catch::Contains("has finished"));
    CHECK_THROWS_AS(trainer.parameters(), ConfigError);
  }
}

TEST_CASE("a class outside the evaluation is refused", "[inference]") {
  ClassEvaluation e;
  e.confusion = {{3, 1}, {0, 4}};
  CHECK_THROWS_AS(e.precision(2), ConfigError);
  CHECK_THROWS_AS(e.recall(-1), ConfigError);
  CHECK_THROWS_AS(e.class_accuracy(99), ConfigError);
  CHECK(e.precision(1) == Approx(0.8));
}

TEST_CASE("a batch beyond any that trains is refused, not planned", "[trainer]") {
  CpuBackend backend(1);
  Network net = make_preset("small", Shape{1, 12, 12}, 4);
  TrainerOptions o = testing::constant_sgd(INT_MAX);
  o.memory_budget = 1 << 20;
  CHECK_THROWS_WITH(Trainer(net, backend, memory::host_resource(), o), Catch::Contains("at most 16777216 are taken"));
}

TEST_CASE("options a trainer cannot run with are refused before planning", "[trainer]") {
  CpuBackend backend(1);
  const Shape image{1, 12, 12};
  Network empty(image);
  CHECK_THROWS_WITH(Trainer(empty, backend, memory::host_resource(), testing::constant_sgd(8)),
                    Catch::Contains("the network has no layers"));
  Network net = make_preset("small", image, 4);
  TrainerOptions o = testing::constant_sgd(8);
  o.regrow_after_steps = -1;
  CHECK_THROWS_WITH(Trainer(net, backend, memory::host_resource(), o), Catch::Contains("regrow_after_steps"));
  o = testing::constant_sgd(8);
  o.total_steps = -10;
  CHECK_THROWS_WITH(Trainer(net, backend, memory::host_resource(), o), Catch::Contains("total_steps"));
  o = testing::constant_sgd(8);
  o.arena_factor = std::nan("");
  CHECK_THROWS_WITH(Trainer(net, backend, memory::host_resource(), o), Catch::Contains("arena_factor"));
  CHECK_THROWS_WITH(CpuBackend(100000), Catch::Contains("at most 1024 threads"));
  o = testing::constant_sgd(8);
  o.memory_budget = 1 << 20;
  memory::MemoryStack stack(memory::host_resource(), memory_options(o));
  // Added to the plan's bytes, it would wrap around to a plan that "fits".
  CHECK_THROWS_WITH(stack.book_staging(SIZE_MAX), Catch::Contains("more than any memory holds"));
}
