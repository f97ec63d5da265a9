#pragma once
// The step planner: every buffer a training step touches, with the interval of time steps in
// which it is live, gets a fixed offset in one arena. Buffers whose intervals overlap never
// share bytes. Offsets are assigned greedily, largest buffer first, each into the best-fitting
// gap left by the buffers already placed that overlap it in time.
#include <cstddef>
#include <string>
#include <vector>

#include <cnnengine/memory/memory_resource.hpp>

namespace cnn::memory {

struct BufferRequest {
  std::string name;
  std::size_t bytes = 0;
  int first_use = 0;  // inclusive time step
  int last_use = 0;   // inclusive time step
  Category category = Category::activations;
};

struct Plan {
  std::vector<std::size_t> offsets;  // one per request, in request order
  std::size_t arena_bytes = 0;       // size of the arena the offsets need
  // The largest sum of (aligned) bytes live at one time step: no assignment can do better.
  std::size_t lower_bound_bytes = 0;
  CategoryBytes peak_by_category;    // bytes by category at the moment of the lower bound
  std::size_t alignment = 0;

  double overhead() const {
    return lower_bound_bytes ? static_cast<double>(arena_bytes) / lower_bound_bytes : 1.0;
  }
};

// Throws ConfigError on a request with last_use < first_use.
Plan plan_offsets(const std::vector<BufferRequest>& requests, std::size_t alignment);

// True when no two requests that are live at the same time overlap in the plan and every
// buffer lies inside the arena. Used by tests and as a debug check.
bool plan_is_valid(const std::vector<BufferRequest>& requests, const Plan& plan);

}  // namespace cnn::memory
