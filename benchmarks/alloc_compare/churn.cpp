// churn and extended: the allocation sequence of training steps at varying batch, no compute.
// Dynamic strategies allocate each step buffer at its first use and free it after its last
// (DynamicStepMemory, as in real training); planned runs every batch in the arena planned once
// at B, as the Trainer does. Both hold the Trainer's input staging (on CUDA) beside it.
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>

#include "engine/core/detail/input_stager.hpp"
#include "engine/train/detail/step_memory.hpp"
#include "workloads.hpp"

namespace alloc_compare {

namespace mem = cnn::memory;
using Clock = std::chrono::steady_clock;

namespace {

// Runs one step's time steps; on a refused request releases what the step holds and returns
// false (a framework would lose the step).
bool run_step(cnn::StepMemory& memory, int time_steps) {
  for (int t = 0; t < time_steps; ++t) {
    try {
      memory.begin(t);
    } catch (const mem::OutOfMemory&) {
      for (int u = t; u < time_steps; ++u) memory.end(u);  // everything still held ends at u >= t
      return false;
    }
    memory.end(t);
  }
  return true;
}

}  // namespace

RunResult run_churn(Workbench& bench, cnn::memory::Strategy strategy, const ChurnSpec& spec) {
  // The plan the Trainer makes under the budget: on CUDA its convolutions may take leaner
  // algorithms than without one.
  const cnn::MemoryBreakdown sizes = bench.breakdown(spec.batch, spec.budget);
  const std::size_t fixed = sizes.persistent.total() + sizes.library;
  RunResult r = bench.start(spec.workload, strategy, spec.budget, sizes.lower_bound + fixed);
  const cnn::StepPlan& full_plan = bench.plan(spec.batch, spec.budget);

  std::optional<Rig> rig;
  HeldBlocks held;
  std::optional<cnn::InputStager> input;  // the Trainer's input slot and its pinned twin
  std::unique_ptr<cnn::PlannedStepMemory> planned;
  std::map<int, std::unique_ptr<cnn::DynamicStepMemory>> dynamic;  // by batch, reused
  try {
    const std::size_t persistent = sizes.persistent.total() + sizes.input_staging;
    rig.emplace(bench.base(), bench.backend().staging_memory(),
                rig_config(bench, strategy, spec.budget, persistent, sizes.arena_bytes));
    for (std::size_t c = 0; c < mem::kCategoryCount; ++c) {
      const auto category = static_cast<mem::Category>(c);
      if (sizes.persistent[category]) held.add(rig->upstream(), sizes.persistent[category], category);
    }
    if (rig->planned())
      planned = std::make_unique<cnn::PlannedStepMemory>(
          full_plan, held.add(rig->upstream(), sizes.arena_bytes, mem::Category::activations));
    const cnn::Network& network = bench.network();
    input.emplace(bench.backend(), rig->stack(), network.input_shape().elements(), network.target_bytes(), spec.batch);
  } catch (const mem::OutOfMemory& e) {
    r.setup_failed = true;
    r.failure = e.what();
    r.peak_reserved = rig ? rig->peak_reserved() : 0;
    return r;
  }
  r.setup_reserved = rig->reserved();

  for (long step = 0; step < spec.steps; ++step) {
    const int batch = spec.fixed_batch ? spec.batch : churn_batch(bench.config().seed, step, spec.batch);
    cnn::StepMemory* memory = planned.get();
    int time_steps = full_plan.time_steps;
    if (!memory) {
      const cnn::StepPlan& plan = bench.plan(batch);
      auto& slot = dynamic[batch];
      if (!slot) slot = std::make_unique<cnn::DynamicStepMemory>(plan, *rig->step_allocator());
      memory = slot.get();
      time_steps = plan.time_steps;
    }
    rig->begin_step();
    const auto start = Clock::now();
    run_step(*memory, time_steps);
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
    r.steps.push_back(rig->end_step(batch, static_cast<std::uint64_t>(ns)));
    if (spec.stop_at_first_oom && r.steps.back().out_of_memory) {
      r.failure = "out of memory at step " + std::to_string(step + 1);
      break;
    }
  }
  r.peak_reserved = rig->peak_reserved();
  return r;
}

}  // namespace alloc_compare
