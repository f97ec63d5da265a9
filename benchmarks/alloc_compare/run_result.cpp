#include "run_result.hpp"

#include <algorithm>
#include <cmath>

namespace alloc_compare {

Summary summarize(const RunResult& run) {
  Summary s;
  s.steps = run.steps.size();
  s.completed = !run.setup_failed && run.failure.empty();
  s.reserved_ratio = run.reference_bytes ? static_cast<double>(run.peak_reserved) / static_cast<double>(run.reference_bytes) : 0;
  if (run.steps.empty()) return s;

  // Step 1 pays for a pool's growth and for cold caches; the means leave it out when there is more.
  const std::size_t skip = run.steps.size() > static_cast<std::size_t>(run.warmup) ? static_cast<std::size_t>(run.warmup) : 0;
  const std::size_t measured = run.steps.size() - skip;
  double step_ns = 0, allocator_ns = 0, calls = 0, fragmentation = 0;
  std::size_t fragmentation_samples = 0;
  s.reserved_min = run.steps.front().reserved;
  for (std::size_t i = 0; i < run.steps.size(); ++i) {
    const StepSample& step = run.steps[i];
    s.upstream_calls_in_steps += step.upstream_calls;
    s.out_of_memory += step.out_of_memory;
    s.steps_with_oom += step.out_of_memory ? 1 : 0;
    s.reserved_min = std::min(s.reserved_min, step.reserved);
    s.reserved_max = std::max(s.reserved_max, step.reserved);
    if (!std::isnan(step.fragmentation)) {
      fragmentation += step.fragmentation;
      ++fragmentation_samples;
      s.fragmentation_max = std::isnan(s.fragmentation_max) ? step.fragmentation : std::max(s.fragmentation_max, step.fragmentation);
    }
    if (i < skip) continue;
    step_ns += static_cast<double>(step.step_ns);
    allocator_ns += static_cast<double>(step.allocator_ns);
    calls += static_cast<double>(step.upstream_calls);
  }
  s.ms_per_step = step_ns / static_cast<double>(measured) * 1e-6;
  s.allocator_us_per_step = allocator_ns / static_cast<double>(measured) * 1e-3;
  s.upstream_calls_per_step = calls / static_cast<double>(measured);
  if (fragmentation_samples) s.fragmentation_mean = fragmentation / static_cast<double>(fragmentation_samples);
  return s;
}

}  // namespace alloc_compare
