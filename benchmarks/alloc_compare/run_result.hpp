#pragma once
// What one run of one workload on one strategy measured: a sample per step and the figures
// derived from them.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <cnnengine/memory/memory_stack.hpp>

namespace alloc_compare {

inline constexpr double kNotApplicable = std::numeric_limits<double>::quiet_NaN();

struct StepSample {
  int batch = 0;
  std::size_t reserved = 0;        // the most the upstream held during the step
  std::size_t upstream_calls = 0;  // allocations the upstream served during the step
  std::size_t upstream_frees = 0;
  std::uint64_t step_ns = 0;
  std::uint64_t allocator_ns = 0;  // inside the strategy's allocate and deallocate
  double fragmentation = kNotApplicable;  // at the step's fullest moment (pool and arena only)
  std::size_t out_of_memory = 0;   // requests the strategy (or the budget) refused
};

struct RunResult {
  std::string workload;
  cnn::memory::Strategy strategy = cnn::memory::Strategy::planned;
  std::size_t budget = 0;           // 0: none
  bool setup_failed = false;        // the persistent blocks or the reservation did not fit
  std::string failure;              // why the run stopped early, if it did
  std::size_t setup_reserved = 0;   // held from the upstream before step 1
  std::size_t peak_reserved = 0;    // over the whole run
  std::size_t reference_bytes = 0;  // liveness lower bound at the batch + blocks held all run
  int warmup = 1;                   // first steps left out of the per-step means
  std::vector<StepSample> steps;
};

struct Summary {
  std::size_t steps = 0;
  double ms_per_step = 0;
  double allocator_us_per_step = 0;
  double upstream_calls_per_step = 0;    // after the warm-up
  std::size_t upstream_calls_in_steps = 0;  // every step, warm-up included
  std::size_t reserved_min = 0, reserved_max = 0;  // per-step reserved over the run
  double reserved_ratio = 0;             // peak reserved / reference
  double fragmentation_mean = kNotApplicable, fragmentation_max = kNotApplicable;
  std::size_t out_of_memory = 0;
  std::size_t steps_with_oom = 0;
  bool completed = true;                 // no setup failure, no early stop
};

Summary summarize(const RunResult& run);

}  // namespace alloc_compare
