#pragma once
// The allocation strategy chosen at run time by name, so that one training can run on each.
#include <cstddef>
#include <memory>
#include <string_view>

#include "cnnengine/memory/memory_resource.hpp"

namespace cnn::memory {

// "direct", "pool" (default PoolOptions) or "arena" (reserving `arena_capacity` now).
// The planned strategy is the planner's arena and is built by the engine, not here.
// Throws ConfigError naming the accepted names on any other name.
std::unique_ptr<MemoryResource> make_strategy(std::string_view name, MemoryResource& upstream,
                                              std::size_t arena_capacity);

}  // namespace cnn::memory
