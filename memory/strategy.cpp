#include "cnnengine/memory/strategy.hpp"

#include <stdexcept>
#include <string>

#include "cnnengine/base/error.hpp"
#include "cnnengine/memory/arena_resource.hpp"
#include "cnnengine/memory/direct_resource.hpp"
#include "cnnengine/memory/pool_resource.hpp"

namespace cnn::memory {

std::unique_ptr<MemoryResource> make_strategy(std::string_view name, MemoryResource& upstream,
                                              std::size_t arena_capacity) {
  if (name == "direct") return std::make_unique<DirectResource>(upstream);
  if (name == "pool") return std::make_unique<PoolResource>(upstream);
  if (name == "arena") return std::make_unique<ArenaResource>(upstream, arena_capacity);
  throw ConfigError("unknown memory strategy '" + std::string(name) +
                    "': expected direct, pool or arena");
}

}  // namespace cnn::memory
