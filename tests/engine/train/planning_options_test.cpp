// What the trainer plans with: the user's options as given, and what the trainer adds of its own
// (its optimizer's state, its small persistent buffers, the budget's account). The user's
// TrainerOptions carry none of the planner's own fields.
#include <catch2/catch.hpp>

#include <type_traits>

#include "backends/cpu/cpu_backend.hpp"
#include <cnnengine/data/loader.hpp>
#include "engine/train/planning_options.hpp"
#include <cnnengine/engine/train/trainer.hpp>
#include "memory/host_resource.hpp"
#include <cnnengine/memory/memory_stack.hpp>
#include <cnnengine/models/network_text.hpp>

using namespace cnn;

namespace {

const Shape kImage{1, 12, 12};

// The CPU backend, with a library that keeps a workspace of its own (as cuBLAS does).
class LibraryBackend final : public CpuBackend {
 public:
  using CpuBackend::CpuBackend;
  std::size_t library_reserved_bytes() const override { return 96 * 1024; }
};

}  // namespace

static_assert(!std::is_base_of_v<BatchPlanOptions, TrainerOptions>, "the planner's fields are not the user's");

TEST_CASE("planning options are the user's options and the trainer's own", "[trainer][planner][budget]") {
  LibraryBackend backend(1);
  Network net = make_preset("small", kImage, 4);
  TrainerOptions o;
  o.batch = 48;
  o.accumulate = 3;
  o.memory_budget = 8 << 20;
  o.memory_strategy = memory::Strategy::pool;
  o.workspace_limit = 1 << 20;
  o.rewrite_graph = false;
  o.recompute = RecomputePolicy::cheap;
  const BatchPlanOptions p = planning_options(o, net, backend);
  CHECK(p.batch == 48);
  CHECK(p.accumulate == 3);
  CHECK(p.micro_batch == 0);
  CHECK(p.strategy == memory::Strategy::pool);
  CHECK(p.workspace_limit == std::size_t{1} << 20);
  CHECK_FALSE(p.rewrite_graph);
  CHECK(p.recompute == RecomputePolicy::cheap);
  CHECK(p.optimizer_slots == 2);  // AdamW's two moments
  CHECK(p.extra_persistent > 0);  // the loss sums and the micro-batch's scalars
  CHECK(p.account.budget() == std::size_t{8} << 20);
  CHECK(p.account.libraries() == 96 * 1024);
  CHECK(p.account.communication() == 0);
  CHECK(p.account.loader_staging() == 0);
  o.optimizer.kind = OptimizerKind::sgd;
  o.optimizer.momentum = 0.0f;
  CHECK(planning_options(o, net, backend).optimizer_slots == 0);
}

TEST_CASE("the trainer's plan sets aside the libraries' workspace in its stack's account", "[trainer][budget]") {
  LibraryBackend backend(1);
  Network probe_net = make_preset("small", kImage, 4);
  TrainerOptions o;
  o.batch = 16;
  o.memory_budget = 0;
  const std::size_t whole = Trainer(probe_net, backend, memory::host_resource(), o).breakdown(16).total();
  o.memory_budget = whole;  // holds micro-batch 16 only with the library's bytes counted once
  memory::MemoryStack stack(memory::host_resource(), backend.staging_memory(), memory_options(o));
  Network net = make_preset("small", kImage, 4);
  Trainer trainer(net, backend, stack, o);
  CHECK(trainer.micro_batch() == 16);
  CHECK(trainer.memory().library == 96 * 1024);
  CHECK(stack.account().libraries() == 96 * 1024);
  CHECK(stack.cap() == whole - 96 * 1024);
  CHECK(stack.statistics().current_bytes <= stack.cap());
}
