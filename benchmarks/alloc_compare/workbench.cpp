#include "workbench.hpp"

#include <algorithm>
#include <cstdint>

#include <cnnengine/engine/core/backend.hpp>
#include "engine/train/planning_options.hpp"
#include <cnnengine/engine/train/trainer.hpp>
#include <cnnengine/memory/memory_resource.hpp>

namespace alloc_compare {

namespace mem = cnn::memory;

Workbench::Workbench(std::function<cnn::Network()> make_network, cnn::Backend& backend,
                     mem::MemoryResource& base, BenchConfig config)
    : make_network_(std::move(make_network)), network_(make_network_()), backend_(backend), base_(base),
      config_(config) {}

const cnn::MicroBatchPlan& Workbench::plans(int batch, std::size_t budget) {
  const auto key = std::make_pair(batch, budget);
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    cnn::BatchPlanOptions o = plan_options(budget);
    o.batch = batch;
    it = plans_.emplace(key, cnn::plan_micro_batch(cnn::BatchPlanner(network_, backend_, o), batch)).first;
  }
  return it->second;
}

const cnn::StepPlan& Workbench::plan(int batch, std::size_t budget) { return plans(batch, budget).training; }

cnn::MemoryBreakdown Workbench::breakdown(int batch, std::size_t budget) { return plans(batch, budget).breakdown; }

cnn::BatchPlanOptions Workbench::plan_options(std::size_t budget) const {
  cnn::TrainerOptions o;  // the Trainer's defaults: AdamW
  o.memory_budget = budget;
  return cnn::planning_options(o, network_, backend_);
}

RunResult Workbench::start(const std::string& workload, cnn::memory::Strategy strategy, std::size_t budget,
                           std::size_t reference_bytes) const {
  RunResult r;
  r.workload = workload;
  r.strategy = strategy;
  r.budget = budget;
  r.reference_bytes = reference_bytes;
  r.warmup = config_.warmup;
  return r;
}

RigConfig rig_config(const Workbench& bench, cnn::memory::Strategy strategy, std::size_t budget, std::size_t persistent,
                     std::size_t planned_arena) {
  RigConfig c;
  c.strategy = strategy;
  c.budget = budget;
  c.library = bench.backend().library_reserved_bytes();
  c.persistent = persistent;
  c.planned_arena = planned_arena;
  c.arena_factor = bench.config().arena_factor;
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

int churn_batch(std::uint64_t seed, long step, int batch) {
  const int low = std::max(1, batch / 2);
  const std::uint64_t draw = cnn::splitmix64(seed ^ cnn::splitmix64(static_cast<std::uint64_t>(step)));
  return low + static_cast<int>(draw % static_cast<std::uint64_t>(batch - low + 1));
}

}  // namespace alloc_compare
