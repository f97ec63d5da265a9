#include "rig.hpp"

#include <algorithm>

#include "cnnengine/memory/out_of_memory.hpp"
#include "cnnengine/memory/strategy.hpp"

namespace alloc_compare {

namespace mem = cnn::memory;

Rig::Rig(mem::MemoryResource& base, const RigConfig& config) : stats_(base) {
  if (config.budget) budget_.emplace(stats_, config.budget);
  if (config.strategy == "planned") return;
  has_free_list_ = config.strategy == "pool" || config.strategy == "arena";
  if (config.strategy == "arena" && config.arena_capacity == 0) {
    mem::OutOfMemoryDetails details;
    details.limit = config.budget;
    details.resource = "arena";
    throw mem::OutOfMemory("the budget leaves nothing for the arena", details);
  }
  strategy_ = mem::make_strategy(config.strategy, upstream(), config.arena_capacity);
  timing_.emplace(*strategy_);
  probe_.emplace(*timing_);
}

void Rig::begin_step() {
  at_begin_ = stats_.statistics();
  run_peak_ = std::max(run_peak_, at_begin_.peak_bytes);  // the setup before step 1
  stats_.reset_peak();
  ns_at_begin_ = timing_ ? timing_->nanoseconds() : 0;
  refusals_at_begin_ = timing_ ? timing_->refusals() : 0;
  if (probe_) probe_->begin_step();
}

StepSample Rig::end_step(int batch, std::uint64_t step_ns) {
  const mem::Statistics now = stats_.statistics();
  StepSample s;
  s.batch = batch;
  s.reserved = now.peak_bytes;
  s.upstream_calls = now.allocations - at_begin_.allocations;
  s.upstream_frees = now.deallocations - at_begin_.deallocations;
  s.step_ns = step_ns;
  if (timing_) {
    s.allocator_ns = timing_->nanoseconds() - ns_at_begin_;
    s.out_of_memory = timing_->refusals() - refusals_at_begin_;
  }
  if (has_free_list_) s.fragmentation = probe_->fragmentation();
  run_peak_ = std::max(run_peak_, now.peak_bytes);
  return s;
}

std::size_t Rig::peak_reserved() const { return std::max(run_peak_, stats_.statistics().peak_bytes); }

}  // namespace alloc_compare
