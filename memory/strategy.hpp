#pragma once
// The allocation strategy chosen at run time, so that one training can run on each.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "memory/memory_resource.hpp"

namespace cnn::memory {

enum class Strategy {
  planned,  // the default: one arena, every step buffer at an offset fixed before step 1
  arena,    // one reservation up front, best fit inside it, never grows
  pool,     // caching best fit that grows (PyTorch's and TensorFlow's way)
  direct,   // one upstream call per request
};

// "planned", "arena", "pool" or "direct"; anything else is a ConfigError naming them.
Strategy parse_strategy(std::string_view word);
std::string to_string(Strategy strategy);

// The resource that serves step buffers under `strategy`, over `upstream`; the arena reserves
// `arena_capacity` now. The planned strategy has none (its arena is the engine's plan): asking
// for it is a ConfigError.
std::unique_ptr<MemoryResource> make_strategy(Strategy strategy, MemoryResource& upstream, std::size_t arena_capacity);

}  // namespace cnn::memory
