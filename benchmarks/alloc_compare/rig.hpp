#pragma once
// The resource stack one strategy runs on:
//
//   step buffers  -> PeakProbe -> TimingAdaptor -> strategy -+
//   persistent blocks, the planned arena --------------------+-> [BudgetAdaptor] -> StatisticsAdaptor -> base
//
// The statistics adaptor sits on the base upstream (host or CUDA device), so its allocations are
// the upstream calls and its bytes are what the run reserves. The budget, when there is one,
// plays a device of that capacity. "planned" has no strategy: its arena is one upstream call
// made before step 1, as the Trainer does.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "cnnengine/memory/budget_adaptor.hpp"
#include "cnnengine/memory/statistics_adaptor.hpp"
#include "peak_probe.hpp"
#include "run_result.hpp"
#include "timing_adaptor.hpp"

namespace alloc_compare {

struct RigConfig {
  std::string strategy;            // planned, arena, pool or direct
  std::size_t budget = 0;          // 0: none
  std::size_t arena_capacity = 0;  // "arena" only
};

class Rig {
 public:
  // Throws OutOfMemory when the arena's reservation does not fit the budget.
  Rig(cnn::memory::MemoryResource& base, const RigConfig& config);
  Rig(const Rig&) = delete;
  Rig& operator=(const Rig&) = delete;

  bool planned() const { return !strategy_; }
  // Where the persistent blocks and the planned arena come from.
  cnn::memory::MemoryResource& upstream() { return budget_ ? static_cast<cnn::memory::MemoryResource&>(*budget_) : stats_; }
  // Where step buffers come from; null for planned.
  cnn::memory::MemoryResource* step_allocator() { return probe_ ? &*probe_ : nullptr; }

  void begin_step();
  StepSample end_step(int batch, std::uint64_t step_ns);
  std::size_t reserved() const { return stats_.statistics().current_bytes; }
  std::size_t peak_reserved() const;

 private:
  bool has_free_list_ = false;  // pool and arena: fragmentation is defined
  cnn::memory::StatisticsAdaptor stats_;
  std::optional<cnn::memory::BudgetAdaptor> budget_;
  std::unique_ptr<cnn::memory::MemoryResource> strategy_;
  std::optional<TimingAdaptor> timing_;
  std::optional<PeakProbe> probe_;

  cnn::memory::Statistics at_begin_;
  std::uint64_t ns_at_begin_ = 0, refusals_at_begin_ = 0;
  std::size_t run_peak_ = 0;  // over the steps ended so far
};

// Every strategy the comparison knows, in table order.
inline const char* const kStrategies[] = {"planned", "arena", "pool", "direct"};

}  // namespace alloc_compare
