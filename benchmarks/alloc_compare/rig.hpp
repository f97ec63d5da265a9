#pragma once
// The resource stack one strategy runs on: the engine's MemoryStack (the one the Trainer
// builds), with the comparison's own probes over the step buffers:
//
//   step buffers -> PeakProbe -> TimingAdaptor -> strategy -+
//   persistent blocks, the planned arena, the input slot ----+-> [budget] -> statistics -> base
//   the input's pinned twin ---------------------------------> [budget] -> staging statistics -> staging
//
// The statistics sit on the base upstream (host or CUDA device), so their allocations are the
// upstream calls and their bytes are what the run reserves. The budget, when there is one,
// plays a device of that capacity. "planned" has no strategy: its arena is one upstream call
// made before step 1, as the Trainer does.
#include <cstdint>
#include <string>

#include <cnnengine/memory/memory_stack.hpp>
#include "peak_probe.hpp"
#include "run_result.hpp"
#include "timing_adaptor.hpp"

namespace alloc_compare {

struct RigConfig {
  cnn::memory::Strategy strategy = cnn::memory::Strategy::planned;
  std::size_t budget = 0;           // 0: none
  std::size_t library = 0;          // counted in the budget, held outside the stack (the libraries' own)
  std::size_t persistent = 0;       // blocks held for the whole run (the input's staging too): the
                                    // arena gets what the budget leaves
  std::size_t planned_arena = 0;    // without a budget the arena reserves arena_factor x this
  double arena_factor = 2.0;
};

class Rig {
 public:
  // `staging`: the backend's staging memory, where a Trainer on the stack stages its input
  // (pinned on CUDA). Throws OutOfMemory when the arena's reservation does not fit the budget.
  Rig(cnn::memory::MemoryResource& base, cnn::memory::MemoryResource& staging, const RigConfig& config);
  Rig(const Rig&) = delete;
  Rig& operator=(const Rig&) = delete;

  bool planned() const { return probe_ == nullptr; }
  // For a Trainer of the run: its persistent blocks, step memory and statistics come from here.
  cnn::memory::MemoryStack& stack() { return stack_; }
  // Where the persistent blocks and the planned arena come from.
  cnn::memory::MemoryResource& upstream() { return stack_.blocks(); }
  // Where step buffers come from; null for planned.
  cnn::memory::MemoryResource* step_allocator() { return stack_.step_buffers(); }

  void begin_step();
  StepSample end_step(int batch, std::uint64_t step_ns);
  std::size_t reserved() const { return stack_.statistics().current_bytes; }
  std::size_t peak_reserved() const;

 private:
  bool has_free_list_ = false;  // pool and arena: fragmentation is defined
  cnn::memory::MemoryStack stack_;
  TimingAdaptor* timing_ = nullptr;
  PeakProbe* probe_ = nullptr;

  cnn::memory::Statistics at_begin_;
  std::uint64_t ns_at_begin_ = 0, refusals_at_begin_ = 0;
  std::size_t run_peak_ = 0;  // over the steps ended so far
};

// Every strategy the comparison knows, in table order.
inline const char* const kStrategies[] = {"planned", "arena", "pool", "direct"};

}  // namespace alloc_compare
