#pragma once
// Replays a recorded trace against a resource: the same requests in the same order, so that
// strategies (and simulated device capacities: a BudgetAdaptor over a strategy) can be compared
// on one training run.
#include <cstddef>
#include <vector>

#include <cnnengine/memory/memory_resource.hpp>
#include "memory/trace.hpp"

namespace cnn::memory {

struct ReplayResult {
  std::size_t allocations = 0;        // requests the resource served
  std::size_t deallocations = 0;
  std::size_t out_of_memory = 0;      // requests the resource refused
  std::size_t skipped_frees = 0;      // frees of blocks whose allocation was refused
  std::size_t recorded_failures = 0;  // requests refused in the recording (not retried)
  std::size_t peak_bytes = 0;         // most requested bytes live at once
  std::size_t live_at_end = 0;        // bytes the trace never freed (freed after the replay)
};

// Every block still live at the end is freed, so `resource` is left as it was found.
// Throws DataError on an inconsistent trace (a free of an id never allocated,
// an id allocated twice, a free whose size differs from its allocation).
ReplayResult replay(const std::vector<TraceEvent>& events, MemoryResource& resource);

}  // namespace cnn::memory
