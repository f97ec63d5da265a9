// A Predictor: the outputs and evaluation of a trainer to the bit, on its own smaller plan, under
// a budget a trainer could not train in, allocating nothing per call.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "backends/cpu/cpu_backend.hpp"
#include "engine/infer/inference_planner.hpp"
#include <cnnengine/engine/infer/predictor.hpp>
#include "memory/host_resource.hpp"
#include <cnnengine/models/network_text.hpp>
#include "tests/engine/test_networks.hpp"
#include "tests/heap_counter.hpp"

using namespace cnn;
using cnn::testing::SyntheticData;
using memory::Category;

namespace {

// Batches of at most 16 from sample `from` on, `count` samples in all.
NextBatch batches_of(const SyntheticData& data, int from, int count) {
  return [&data, from, count, next = 0]() mutable -> std::optional<Batch> {
    if (next == count) return std::nullopt;
    const int size = std::min(16, count - next);
    const Batch b = data.batch(from + next, size);
    next += size;
    return b;
  };
}

}  // namespace

TEST_CASE("a predictor gives a trainer's evaluation to the bit", "[infer][predictor]") {
  const Shape image{1, 12, 12};
  constexpr int kClasses = 4, kSamples = 40;
  CpuBackend backend(2);
  const SyntheticData data(48 + kSamples, image, kClasses, 3);
  for (const char* name : {"small", "small-bn", "dropout"}) {
    INFO(name);
    auto make = [&] {
      return std::string(name) == "dropout" ? testing::small_with_dropout(image, kClasses)
                                            : make_preset(name, image, kClasses);
    };
    Network trained = make();
    Trainer trainer(trained, backend, memory::host_resource(), testing::constant_sgd(16));
    for (int s = 0; s < 3; ++s) trainer.train_step(data.batch(s * 16, 16));

    Network net = make();
    InferenceOptions o;
    o.max_batch = 16;  // the trainer's micro-batch: the same sums in the same order
    Predictor predictor(net, backend, o);
    REQUIRE(predictor.micro_batch() == 16);
    predictor.parameters().upload(trainer.parameters().download());

    // The trainer's forward passes and the predictor's agree to the bit: the same loss sums, the
    // same predictions.
    const ClassEvaluation want = trainer.evaluate_classes(batches_of(data, 48, kSamples));
    const ClassEvaluation have = predictor.evaluate_classes(batches_of(data, 48, kSamples));
    CHECK(have.samples == want.samples);
    CHECK(have.loss == want.loss);
    CHECK(have.accuracy == want.accuracy);
    CHECK(have.confusion == want.confusion);
    const EvalResult plain = predictor.evaluate(batches_of(data, 48, kSamples));
    CHECK(plain.loss == want.loss);
    CHECK(plain.accuracy == want.accuracy);
  }
}

TEST_CASE("a predictor reserves its plan once: no gradients, no optimizer state, nothing per call",
          "[infer][predictor]") {
  const Shape image{1, 12, 12};
  CpuBackend backend(1);
  Network net = make_preset("small-bn", image, 4);
  InferenceOptions o;
  o.max_batch = 16;
  Predictor predictor(net, backend, o);
  const SyntheticData data(40, image, 4, 5);
  std::vector<float> logits(40 * 4);
  predictor.logits(data.images.data(), 40, logits.data());  // a first call: anything lazy happens now
  const NextBatch next = batches_of(data, 0, 40);

  const memory::Statistics before = predictor.memory_stack().statistics();
  const long heap_before = testing::heap_allocations();
  predictor.logits(data.images.data(), 40, logits.data());  // 16 + 16 + 8
  const EvalResult e = predictor.evaluate(next);
  CHECK(testing::heap_allocations() == heap_before);
  const memory::Statistics after = predictor.memory_stack().statistics();
  CHECK(after.allocations == before.allocations);
  CHECK(after.peak_bytes == before.peak_bytes);
  CHECK(e.samples == 40);

  CHECK(after.peak_by_category[Category::parameter_gradients] == 0);
  CHECK(after.peak_by_category[Category::optimizer_state] == 0);
  CHECK(after.peak_bytes <= predictor.memory().total());
  CHECK(predictor.memory().persistent[Category::parameter_gradients] == 0);
  CHECK(predictor.memory().persistent[Category::optimizer_state] == 0);
  CHECK_FALSE(predictor.parameters().has_gradients());
  CHECK(predictor.parameters().gradients().empty());
  CHECK(predictor.parameters().floats(ParameterStore::Block::optimizer_state) == 0);
}

TEST_CASE("a predictor holds its budget: the largest micro-batch that fits, a budget too small refused",
          "[infer][predictor][budget]") {
  const Shape image{3, 16, 16};
  CpuBackend backend(1);
  auto resnet = [&] { return make_preset("resnet", image, 10); };
  Network sizing = resnet();
  InferenceOptions o;
  o.max_batch = 32;
  const InferencePlanner planner(sizing, backend, o);
  const std::size_t one = planner.breakdown(1).total();
  const SyntheticData data(8, image, 10, 1);
  std::vector<float> logits(8 * 10);

  SECTION("no budget: max_batch") {
    Network net = resnet();
    CHECK(Predictor(net, backend, o).micro_batch() == 32);
  }
  SECTION("a budget between: the largest micro-batch that fits it") {
    o.account = memory::BudgetAccount(planner.breakdown(5).total());
    Network net = resnet();
    Predictor predictor(net, backend, o);
    CHECK(predictor.micro_batch() >= 5);
    CHECK(predictor.micro_batch() < 32);
    CHECK(predictor.memory().fits());
    CHECK_FALSE(planner.breakdown(predictor.micro_batch() + 1).total() <= o.account.budget());
    predictor.logits(data.images.data(), 8, logits.data());
    const memory::MemoryStack& stack = predictor.memory_stack();
    CHECK(stack.statistics().peak_bytes <= o.account.budget());
  }
  SECTION("one image's inference fits where a trainer cannot train at all") {
    o.account = memory::BudgetAccount(one);
    Network net = resnet();
    Predictor predictor(net, backend, o);
    CHECK(predictor.micro_batch() >= 1);
    predictor.logits(data.images.data(), 8, logits.data());
    CHECK(std::all_of(logits.begin(), logits.end(), [](float x) { return std::isfinite(x); }));
    Network trained = resnet();
    TrainerOptions t = testing::constant_sgd(32);
    t.memory_budget = one;
    CHECK_THROWS_AS(Trainer(trained, backend, t), BudgetTooSmall);
  }
  SECTION("below one image's inference, above its parameters: refused with the inference table") {
    o.account = memory::BudgetAccount(one - 1);
    REQUIRE(o.account.budget() > planner.breakdown(1).persistent.total());
    Network net = resnet();
    try {
      Predictor predictor(net, backend, o);
      FAIL("a budget below one image's inference was taken");
    } catch (const BudgetTooSmall& e) {
      CHECK_THAT(e.what(), Catch::Contains("cannot hold this network's inference even for one image"));
      CHECK_THAT(e.what(), Catch::Contains("inference plan for micro-batch 1"));
      CHECK_THAT(e.what(), !Catch::Contains("parameter gradients"));
      CHECK(e.details().limit == one - 1);
      CHECK(e.details().requested == one);
    }
  }
}

TEST_CASE("a predictor leaves a loader room under its budget", "[infer][predictor][budget]") {
  const Shape image{1, 12, 12};
  CpuBackend backend(1);
  Network sizing = make_preset("small", image, 4);
  InferenceOptions o;
  o.max_batch = 16;
  const std::size_t plain = InferencePlanner(sizing, backend, o).breakdown(16).total();
  constexpr std::size_t kStaging = std::size_t{1} << 20;
  memory::MemoryStack stack(backend.device_memory(), backend.staging_memory(),
                           memory::MemoryOptions{plain + kStaging, memory::Strategy::planned, {}});
  stack.book_staging(kStaging);  // what a loader built after the predictor will stage
  Network net = make_preset("small", image, 4);
  Predictor predictor(net, backend, stack, o);
  CHECK(predictor.micro_batch() == 16);
  CHECK(predictor.memory().loader_staging == kStaging);
  memory::MemoryResource& staging = predictor.memory_stack().staging();
  void* held = staging.allocate(kStaging, 64, Category::data_staging);  // what the loader stages
  CHECK_THROWS_AS(staging.allocate(4096, 64, Category::data_staging), memory::OutOfMemory);
  staging.deallocate(held, kStaging, 64, Category::data_staging);
}

TEST_CASE("a predictor refuses what it cannot run", "[infer][predictor]") {
  const Shape image{1, 12, 12};
  CpuBackend backend(1);
  Network net = make_preset("small", image, 4);
  InferenceOptions o;
  o.max_batch = 8;
  Predictor predictor(net, backend, o);
  SyntheticData data(8, image, 4, 2);
  std::vector<float> logits(8 * 4);
  CHECK_THROWS_AS(predictor.logits(data.images.data(), -1, logits.data()), ConfigError);
  CHECK_THROWS_WITH(predictor.logits(nullptr, 2, logits.data()), Catch::Contains("without images"));
  CHECK_THROWS_WITH(predictor.logits(data.images.data(), 2, nullptr), Catch::Contains("nowhere to write"));
  CHECK_THROWS_WITH(predictor.evaluate(NextBatch{}), Catch::Contains("empty NextBatch"));
  data.labels[3] = 9;
  CHECK_THROWS_WITH(predictor.evaluate(batches_of(data, 0, 8)), Catch::Contains("label 9 of sample 3"));
  data.labels[3] = 1;
  data.images[2 * 144 + 5] = std::nanf("");
  CHECK_THROWS_WITH(predictor.logits(data.images.data(), 8, logits.data()),
                    Catch::Contains("sample 2 of the batch holds a NaN"));
  o.max_batch = 0;
  Network other = make_preset("small", image, 4);
  CHECK_THROWS_AS(Predictor(other, backend, o), ConfigError);
}
