// replay: record a real training run with the trace adaptor, then replay its steps against each
// strategy. The persistent blocks (allocated before step 1) go to the upstream, as the Trainer
// allocates them; each step's requests go to the strategy through memory::replay. For planned,
// each recorded step is planned (a block is live from its allocation to its free) and the
// largest plan is the arena, reserved once.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <unordered_map>

#include <cnnengine/engine/core/backend.hpp>
#include <cnnengine/engine/train/trainer.hpp>
#include "memory/detail/planner.hpp"
#include "memory/trace_adaptor.hpp"
#include "memory/trace_replay.hpp"
#include "workloads.hpp"

namespace alloc_compare {

namespace mem = cnn::memory;
using Clock = std::chrono::steady_clock;

namespace {

std::vector<mem::TraceEvent> slice(const std::vector<mem::TraceEvent>& events, std::size_t from, std::size_t to) {
  return {events.begin() + static_cast<std::ptrdiff_t>(from), events.begin() + static_cast<std::ptrdiff_t>(to)};
}

// The planner's view of one recorded step: every block is a buffer live from its allocation
// event to its free event.
mem::Plan plan_recorded_step(const std::vector<mem::TraceEvent>& step) {
  std::vector<mem::BufferRequest> requests;
  std::unordered_map<std::uint64_t, std::size_t> open;  // id -> request
  for (std::size_t i = 0; i < step.size(); ++i) {
    const mem::TraceEvent& e = step[i];
    const int time = static_cast<int>(i);
    if (e.op == mem::TraceOp::allocate) {
      open[e.id] = requests.size();
      requests.push_back({"block " + std::to_string(e.id), e.bytes, time, time, e.category});
    } else if (e.op == mem::TraceOp::deallocate) {
      const auto it = open.find(e.id);
      if (it == open.end()) throw std::runtime_error("trace: a step frees block " + std::to_string(e.id) + " it did not allocate");
      requests[it->second].last_use = time;
      open.erase(it);
    }
  }
  if (!open.empty()) throw std::runtime_error("trace: a block outlives the step that allocated it");
  mem::Plan plan = mem::plan_offsets(requests, mem::kDefaultAlignment);
  if (!mem::plan_is_valid(requests, plan)) throw std::logic_error("the planner's plan of a recorded step overlaps live blocks");
  return plan;
}

std::size_t allocated_bytes(const std::vector<mem::TraceEvent>& events) {
  std::size_t sum = 0;
  for (const auto& e : events)
    if (e.op == mem::TraceOp::allocate) sum += e.bytes;
  return sum;
}

}  // namespace

RecordedTrace record_training_trace(Workbench& bench, int batch, int steps, const std::filesystem::path& file) {
  std::vector<std::uint64_t> boundaries;  // events recorded before step 1 and after each step
  {
    mem::TraceAdaptor trace(bench.base(), file);
    {
      cnn::Network network = bench.fresh_network();
      cnn::TrainerOptions options;
      options.batch = options.micro_batch = batch;
      options.seed = bench.config().seed;
      options.total_steps = steps;
      options.memory_strategy = mem::Strategy::direct;  // step buffers as a framework allocates them
      cnn::Trainer trainer(network, bench.backend(), trace, options);
      std::vector<float> images(static_cast<std::size_t>(batch) * network.input_shape().elements(), 0.5f);
      std::vector<std::int32_t> labels(static_cast<std::size_t>(batch), 0);
      boundaries.push_back(trace.events_recorded());
      for (int s = 0; s < steps; ++s) {
        trainer.train_step({images.data(), labels.data(), batch});
        boundaries.push_back(trace.events_recorded());
      }
    }
    trace.flush();
    if (!trace.good()) throw std::runtime_error("could not write the trace " + file.string());
  }
  const std::vector<mem::TraceEvent> events = mem::read_trace(file);
  if (events.size() < boundaries.back()) throw std::runtime_error("the trace " + file.string() + " is shorter than recorded");
  RecordedTrace t;
  t.file = file;
  t.batch = batch;
  t.setup = slice(events, 0, boundaries.front());
  for (std::size_t s = 1; s < boundaries.size(); ++s) t.steps.push_back(slice(events, boundaries[s - 1], boundaries[s]));
  t.teardown = slice(events, boundaries.back(), events.size());
  return t;
}

RunResult run_replay(Workbench& bench, const RecordedTrace& trace, cnn::memory::Strategy strategy, std::size_t budget) {
  std::size_t arena_bytes = 0, lower_bound = 0;
  for (const auto& step : trace.steps) {
    const mem::Plan plan = plan_recorded_step(step);
    arena_bytes = std::max(arena_bytes, plan.arena_bytes);
    lower_bound = std::max(lower_bound, plan.lower_bound_bytes);
  }
  const std::size_t persistent = allocated_bytes(trace.setup);
  RunResult r = bench.start("replay", strategy, budget, lower_bound + persistent + bench.backend().library_reserved_bytes());

  std::optional<Rig> rig;
  HeldBlocks held;
  try {
    rig.emplace(bench.base(), bench.backend().staging_memory(),
                rig_config(bench, strategy, budget, persistent, arena_bytes));
    for (const auto& e : trace.setup) {
      if (e.op != mem::TraceOp::allocate) throw std::runtime_error("trace: a free before step 1");
      held.add(rig->upstream(), e.bytes, e.category, e.alignment);
    }
    if (rig->planned() && arena_bytes) held.add(rig->upstream(), arena_bytes, mem::Category::activations);
  } catch (const mem::OutOfMemory& e) {
    r.setup_failed = true;
    r.failure = e.what();
    r.peak_reserved = rig ? rig->peak_reserved() : 0;
    return r;
  }
  r.setup_reserved = rig->reserved();

  for (const auto& step : trace.steps) {
    rig->begin_step();
    const auto start = Clock::now();
    // Planned: the addresses were fixed before step 1; the step asks nothing of an allocator.
    if (!rig->planned()) mem::replay(step, *rig->step_allocator());
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
    r.steps.push_back(rig->end_step(trace.batch, static_cast<std::uint64_t>(ns)));
  }
  r.peak_reserved = rig->peak_reserved();
  return r;
}

}  // namespace alloc_compare
