#include "rig.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>

#include <cnnengine/memory/memory_stack.hpp>

namespace alloc_compare {

namespace mem = cnn::memory;

Rig::Rig(mem::MemoryResource& base, mem::MemoryResource& staging, const RigConfig& config)
    : stack_(base, staging, mem::MemoryOptions{config.budget, config.strategy, {}, config.arena_factor}) {
  stack_.settle_account(config.library, 0);
  stack_.build_step_buffers(config.persistent, config.planned_arena);
  if (!stack_.step_buffers()) return;  // planned
  has_free_list_ = config.strategy == mem::Strategy::pool || config.strategy == mem::Strategy::arena;
  timing_ = &static_cast<TimingAdaptor&>(stack_.wrap_step_buffers(std::make_unique<TimingAdaptor>(*stack_.step_buffers())));
  probe_ = &static_cast<PeakProbe&>(stack_.wrap_step_buffers(std::make_unique<PeakProbe>(*stack_.step_buffers())));
}

void Rig::begin_step() {
  at_begin_ = stack_.statistics();
  run_peak_ = std::max(run_peak_, at_begin_.peak_bytes);  // the setup before step 1
  stack_.reset_peak();
  ns_at_begin_ = timing_ ? timing_->nanoseconds() : 0;
  refusals_at_begin_ = timing_ ? timing_->refusals() : 0;
  if (probe_) probe_->begin_step();
}

StepSample Rig::end_step(int batch, std::uint64_t step_ns) {
  const mem::Statistics now = stack_.statistics();
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

std::size_t Rig::peak_reserved() const { return std::max(run_peak_, stack_.statistics().peak_bytes); }

}  // namespace alloc_compare
