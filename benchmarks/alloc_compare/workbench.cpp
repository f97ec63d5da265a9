#include "workbench.hpp"

#include <algorithm>

#include "cnnengine/engine/detail/counter_rng.hpp"
#include "cnnengine/engine/trainer.hpp"
#include "cnnengine/memory/bytes.hpp"

namespace alloc_compare {

namespace mem = cnn::memory;

namespace {
constexpr std::size_t kArenaGranule = 512;  // the arena strategy rounds its capacity to this
}  // namespace

Workbench::Workbench(std::function<cnn::Network()> make_network, cnn::Backend& backend,
                     mem::MemoryResource& base, BenchConfig config)
    : make_network_(std::move(make_network)), network_(make_network_()), backend_(backend), base_(base),
      config_(config) {}

const cnn::StepPlan& Workbench::plan(int batch) {
  auto it = plans_.find(batch);
  if (it == plans_.end())
    it = plans_.emplace(batch, cnn::plan_step(network_, backend_, batch, true, plan_options(0).workspace_limit)).first;
  return it->second;
}

cnn::BatchPlanOptions Workbench::plan_options(std::size_t budget) const {
  cnn::TrainerOptions o;  // the Trainer's defaults: AdamW
  o.memory_budget = budget;
  return cnn::planning_options(o);
}

cnn::MemoryBreakdown Workbench::breakdown(int batch) {
  cnn::BatchPlanOptions o = plan_options(0);
  o.batch = batch;
  return cnn::BatchPlanner(network_, backend_, o).breakdown(batch);
}

RunResult Workbench::start(const std::string& workload, const std::string& strategy, std::size_t budget,
                           std::size_t reference_bytes) const {
  RunResult r;
  r.workload = workload;
  r.strategy = strategy;
  r.budget = budget;
  r.reference_bytes = reference_bytes;
  r.warmup = config_.warmup;
  return r;
}

RigConfig rig_config(const Workbench& bench, const std::string& strategy, std::size_t budget,
                     std::size_t fixed_bytes, std::size_t planned_arena_bytes) {
  RigConfig c;
  c.strategy = strategy;
  c.budget = budget;
  if (strategy != "arena") return c;
  if (budget) {
    // Rounded down: the arena rounds its capacity up, and must still fit.
    c.arena_capacity = budget > fixed_bytes ? (budget - fixed_bytes) / kArenaGranule * kArenaGranule : 0;
  } else {
    c.arena_capacity = mem::align_up(
        static_cast<std::size_t>(bench.config().arena_factor * static_cast<double>(planned_arena_bytes)), kArenaGranule);
  }
  return c;
}

HeldBlocks::~HeldBlocks() {
  for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it) it->from->deallocate(it->ptr, it->bytes, it->alignment, it->category);
}

void* HeldBlocks::add(mem::MemoryResource& from, std::size_t bytes, mem::Category category, std::size_t alignment) {
  blocks_.reserve(blocks_.size() + 1);  // no allocation may fail after the block is taken
  void* ptr = from.allocate(bytes, alignment, category);
  blocks_.push_back({&from, ptr, bytes, alignment, category});
  return ptr;
}

void hold_library_share(HeldBlocks& held, mem::MemoryResource& from, std::size_t library_bytes) {
  if (library_bytes) held.add(from, library_bytes, mem::Category::workspace);
}

int churn_batch(std::uint64_t seed, long step, int batch) {
  const int low = std::max(1, batch / 2);
  const std::uint64_t draw = cnn::splitmix64(seed ^ cnn::splitmix64(static_cast<std::uint64_t>(step)));
  return low + static_cast<int>(draw % static_cast<std::uint64_t>(batch - low + 1));
}

}  // namespace alloc_compare
