// What a user writes with the fewest concepts: the options read flat (a FitOptions is the trainer's
// options with the run's own), the batch given once for a step loop of one's own (loader_options),
// the loaders a Fit books before it plans (book_fit_loaders, which train_images --plan shows), and
// a fit on the best device present.
#include <catch2/catch.hpp>

#include <optional>

#include "backends/cpu/cpu_backend.hpp"
#include <cnnengine/fit/fit.hpp>
#include <cnnengine/models/network_text.hpp>
#include "tests/engine/small_images.hpp"

using namespace cnn;
using cnn::testing::SmallImages;

namespace {

const Shape kImage{1, 12, 12};

}  // namespace

TEST_CASE("step loop: the loader takes the trainer's batch and seed, and the trainer takes its batches", "[fit]") {
  CpuBackend backend(1);
  SmallImages images(40);
  TrainerOptions options;
  options.batch = 16;
  options.seed = 7;
  options.memory_budget = std::size_t{64} << 20;
  data::LoaderOptions shuffled;
  shuffled.augment_flip = true;
  const data::LoaderOptions loading = loader_options(options, shuffled);
  CHECK(loading.batch == 16);
  CHECK(loading.seed == 7);
  CHECK(loading.rank == 0);
  CHECK(loading.ranks == 1);
  CHECK(loading.augment_flip);  // the rest is the caller's

  memory::MemoryStack memory = memory_stack_for(backend, options);
  CHECK(memory.options().budget == options.memory_budget);
  data::Loader loader(images, loading, memory);
  Network net = make_preset("small", kImage, 4);
  Trainer trainer(net, backend, memory, options);
  CHECK(trainer.batch() == 16);
  CHECK(trainer.memory_stack().account().loader_staging() == loader.staging_bytes());
  int steps = 0;
  for (std::optional<Batch> batch = loader.next(); batch; batch = loader.next()) {
    trainer.train_step(*batch);  // 16, 16, and the epoch's last 8
    ++steps;
  }
  CHECK(steps == 3);

  // A loader's batch or seed set apart from the trainer's would be replaced: refused, named.
  data::LoaderOptions other;
  other.batch = 32;
  CHECK_THROWS_MATCHES(loader_options(options, other), OptionError,
                       Catch::Matchers::Predicate<OptionError>(
                           [](const OptionError& e) { return e.field() == "loading.batch"; }, "names loading.batch"));
  CHECK_THROWS_WITH(loader_options(options, other), Catch::Contains("the trainer's (16), not 32"));
  other = {};
  other.seed = 2;
  CHECK_THROWS_WITH(loader_options(options, other), Catch::Contains("seed"));
  other = {};
  other.ranks = 2;  // this trainer has no communicator
  CHECK_THROWS_WITH(loader_options(options, other), Catch::Contains("ranks"));
}

TEST_CASE("a trainer on a caller's stack takes the stack's memory options over its own", "[fit]") {
  CpuBackend backend(1);
  TrainerOptions options;
  options.batch = 8;
  options.memory_budget = std::size_t{48} << 20;
  options.memory_strategy = memory::Strategy::pool;
  const memory::MemoryOptions memory = memory_options(options);
  CHECK(memory.budget == options.memory_budget);
  CHECK(memory.strategy == memory::Strategy::pool);
  CHECK(memory.arena_factor == options.arena_factor);
  memory::MemoryOptions others = memory;
  others.budget = std::size_t{96} << 20;
  others.strategy = memory::Strategy::planned;
  const TrainerOptions taken = with_memory_options(options, others);
  CHECK(taken.memory_budget == others.budget);
  CHECK(taken.memory_strategy == memory::Strategy::planned);
  CHECK(taken.batch == 8);  // the rest untouched
  // The stack's budget is the one a trainer on it plans under (a BudgetTooSmall names it).
  memory::MemoryStack tiny(backend.device_memory(), backend.staging_memory(), memory::MemoryOptions{1 << 16});
  Network net = make_preset("small", kImage, 4);
  CHECK_THROWS_WITH(Trainer(net, backend, tiny, options), Catch::Contains("the memory budget of 64.00 KiB"));
}

TEST_CASE("book_fit_loaders books what a Fit's loaders stage, before anything is built", "[fit]") {
  CpuBackend backend(1);
  SmallImages train(48), validation(12), test(20);
  FitOptions o;
  o.epochs = 1;
  o.batch = 8;
  o.progress = false;
  o.stop_on_signal = false;
  for (const FitData& data : {FitData(train), FitData(train, &validation, &test), FitData(train, nullptr, &test)}) {
    for (double split : {0.0, 0.25}) {
      if (split > 0 && data.validation) continue;  // a split and a validation set are refused together
      FitOptions options = o;
      options.validation_split = split;
      memory::MemoryStack stack = memory_stack_for(backend, options);
      const std::size_t booked = book_fit_loaders(stack, data, options);
      CHECK(stack.account().loader_staging() == booked);
      Network net = make_preset("small", kImage, 4);
      Fit run(net, backend, data, options);
      CHECK(run.trainer().memory_stack().account().loader_staging() == booked);
      const int loaders = 1 + (split > 0 || data.validation) + (data.test != nullptr);
      CHECK(booked == static_cast<std::size_t>(loaders) * data::Loader::staging_bytes_for(train, loader_options(o)));
    }
  }
}

TEST_CASE("fit without a backend trains on the best device present: the CPU here", "[fit]") {
  SmallImages train(32), test(16);
  Network net = make_preset("small", kImage, 4);
  FitOptions options;
  options.epochs = 2;
  options.batch = 8;
  options.progress = false;
  options.stop_on_signal = false;
  const FitResult result = fit(net, FitData(train, nullptr, &test), options);
  REQUIRE(result.history.size() == 2);
  CHECK(result.steps == 8);
  REQUIRE(result.test);
  CHECK(result.test->samples == 16);
}
