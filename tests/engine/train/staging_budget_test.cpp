// One budget over the trainer's memory and the loaders' staging (the memory stack's account): a
// loader staged before the trainer is counted by its plan, one staged after must have been left
// room (data::Loader::book, for a trainer or a Model on that stack), or it is refused.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include <cnnengine/data/loader.hpp>
#include "engine/train/planning_options.hpp"
#include <cnnengine/engine/train/trainer.hpp>
#include "memory/host_resource.hpp"
#include <cnnengine/memory/memory_stack.hpp>
#include <cnnengine/memory/out_of_memory.hpp>
#include <cnnengine/models/model.hpp>
#include <cnnengine/models/network_text.hpp>
#include "tests/data/data_test_files.hpp"
#include "tests/engine/small_images.hpp"

using namespace cnn;
using cnn::testing::SmallImages;

namespace {

const Shape kImage{1, 12, 12};

data::LoaderOptions loading() {
  data::LoaderOptions o;
  o.batch = 64;
  o.prefetch = 3;
  return o;
}

TrainerOptions training(std::size_t budget) {
  TrainerOptions o;
  o.batch = 64;
  o.memory_budget = budget;
  return o;
}

}  // namespace

TEST_CASE("a loader's staging comes from the trainer's budget", "[trainer][budget][loader]") {
  const SmallImages images(256);
  CpuBackend backend(1);
  const std::size_t staging = data::Loader::staging_bytes_for(images, loading());
  REQUIRE(staging > 0);
  Network probe_net = make_preset("small", kImage, 4);
  Trainer probe(probe_net, backend, memory::host_resource(), training(0));
  const std::size_t at_16 = probe.breakdown(16).total();  // no staging counted

  SECTION("left room by a booking, the loader fits and the plan counts it") {
    Network net = make_preset("small", kImage, 4);
    TrainerOptions o = training(at_16 + staging);
    memory::MemoryStack stack(memory::host_resource(), backend.staging_memory(), memory_options(o));
    CHECK(data::Loader::book(stack, images, loading()) == staging);
    Trainer trainer(net, backend, stack, o);
    CHECK(trainer.micro_batch() == 16);
    CHECK(trainer.memory().loader_staging == staging);
    data::Loader loader(images, loading(), stack);
    CHECK(loader.staging_bytes() == staging);
    CHECK(trainer.memory_stack().staging_bytes() == staging);
    CHECK(trainer.memory_stack().staging_statistics().current_bytes == staging);
    const auto batch = loader.next();
    REQUIRE(batch);
    CHECK(trainer.train_step(*batch).samples == 64);
  }
  SECTION("left no room, the loader is refused by the budget") {
    Network net = make_preset("small", kImage, 4);
    Trainer trainer(net, backend, memory::host_resource(), training(at_16));
    REQUIRE(trainer.micro_batch() == 16);
    try {
      data::Loader loader(images, loading(), trainer.memory_stack());
      FAIL("a loader staged beyond the budget");
    } catch (const memory::OutOfMemory& e) {
      CHECK(e.details().category == memory::Category::data_staging);
      CHECK(e.details().limit == at_16);
    }
    CHECK(trainer.memory_stack().staging_bytes() == 0);
  }
  SECTION("staged before the trainer on the caller's stack, the plan counts it unasked") {
    memory::MemoryStack stack(memory::host_resource(), backend.staging_memory(), memory_options(training(at_16)));
    data::Loader loader(images, loading(), stack);
    Network net = make_preset("small", kImage, 4);
    Trainer trainer(net, backend, stack, training(at_16));
    CHECK(trainer.memory().loader_staging == staging);
    CHECK(trainer.micro_batch() < 16);
    CHECK(stack.statistics().current_bytes + stack.staging_bytes() <= at_16);
  }
}

TEST_CASE("the stack's account counts each loader once, booked or staged", "[memory][budget][loader]") {
  const SmallImages images(256);
  CpuBackend backend(1);
  const std::size_t staging = data::Loader::staging_bytes_for(images, loading());
  memory::MemoryStack stack(memory::host_resource(), backend.staging_memory(), memory::MemoryOptions{1 << 30});
  CHECK(stack.account().loader_staging() == 0);
  data::Loader::book(stack, images, loading());
  data::Loader::book(stack, images, loading());
  CHECK(stack.account().loader_staging() == 2 * staging);
  {
    data::Loader first(images, loading(), stack);  // takes its booking: still counted once
    CHECK(stack.staging_bytes() == staging);
    CHECK(stack.account().loader_staging() == 2 * staging);
  }
  // Given back, its bytes leave the account; the other booking stays.
  CHECK(stack.account().loader_staging() == staging);
  data::Loader unbooked(images, loading(), stack.staging());  // from the resource: counted as staged
  CHECK(stack.account().loader_staging() == 2 * staging);
  // Once settled (a trainer planned), the account keeps what it counted then.
  const memory::BudgetAccount& settled = stack.settle_account(1000, 24);
  CHECK(settled.loader_staging() == 2 * staging);
  CHECK(settled.set_aside() == 1024);
  CHECK(stack.cap() == (std::size_t{1} << 30) - 1024);
  data::Loader later(images, loading(), stack);
  CHECK(stack.account().loader_staging() == 2 * staging);
}

TEST_CASE("a trainer feeding loaders it was told of plans as train_images --plan does", "[trainer][budget][loader]") {
  const SmallImages images(256);
  CpuBackend backend(1);
  const std::size_t staging = data::Loader::staging_bytes_for(images, loading());
  Network probe_net = make_preset("small", kImage, 4);
  Trainer probe(probe_net, backend, memory::host_resource(), training(0));
  const TrainerOptions o = training(probe.breakdown(16).total() + staging);
  memory::MemoryStack stack(memory::host_resource(), backend.staging_memory(), memory_options(o));
  data::Loader::book(stack, images, loading());
  Network planned_net = make_preset("small", kImage, 4);
  const BatchPlanner planner(planned_net, backend, planning_options(o, planned_net, backend, stack));
  Network net = make_preset("small", kImage, 4);
  Trainer trainer(net, backend, stack, o);
  CHECK(planner.choose() == trainer.micro_batch());
  CHECK(planner.breakdown(trainer.micro_batch()).total() == trainer.memory().total());
  CHECK(trainer.memory().loader_staging == staging);
}

TEST_CASE("a model's evaluation loader stages under the model's budget", "[models][budget][loader]") {
  const SmallImages images(256);
  CpuBackend backend(1);
  data::test::TempFolder dir;
  {
    Network net = make_preset("small", kImage, 4);
    Trainer trainer(net, backend, memory::host_resource(), training(0));
    save_checkpoint(dir / "m.ckpt", net, trainer.parameters(), describe_model(net));
  }
  const CheckpointInfo info = read_checkpoint(dir / "m.ckpt");
  const std::size_t staging = data::Loader::staging_bytes_for(images, loading());
  ModelOptions options;
  options.max_batch = 64;
  const std::size_t planned = Model(dir / "m.ckpt", info, backend, options).memory().total();

  SECTION("left room by a loader booked on its stack, the loader fits and the evaluation runs") {
    memory::MemoryStack stack = memory_stack_for(backend, memory::MemoryOptions{.budget = planned + staging});
    CHECK(data::Loader::book(stack, images, loading()) == staging);
    Model model(dir / "m.ckpt", info, backend, stack, options);
    CHECK(model.micro_batch() == 64);
    CHECK(model.memory().loader_staging == staging);
    data::Loader loader(images, loading(), stack);
    loader.start_epoch(1);
    const ClassEvaluation e = model.evaluate([&] { return loader.next(); });
    CHECK(e.samples == 256);
    CHECK(stack.statistics().peak_bytes + stack.staging_statistics().peak_bytes <= planned + staging);
  }
  SECTION("left no room, the loader is refused by the budget") {
    options.memory_budget = planned;
    Model model(dir / "m.ckpt", info, backend, options);
    CHECK_THROWS_AS(data::Loader(images, loading(), model.memory_stack().staging()), memory::OutOfMemory);
  }
}

TEST_CASE("a stack without a staging upstream says so", "[memory][loader]") {
  memory::MemoryStack stack(memory::host_resource(), memory::MemoryOptions{});
  CHECK_THROWS_WITH(stack.staging(), Catch::Contains("without a staging upstream"));
}
