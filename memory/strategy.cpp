#include "memory/strategy.hpp"

#include <string>

#include <cnnengine/base/error.hpp>
#include "memory/arena_resource.hpp"
#include "memory/direct_resource.hpp"
#include "memory/pool_resource.hpp"

namespace cnn::memory {

Strategy parse_strategy(std::string_view word) {
  for (Strategy s : {Strategy::planned, Strategy::arena, Strategy::pool, Strategy::direct})
    if (word == to_string(s)) return s;
  throw ConfigError("unknown memory strategy '" + std::string(word) + "': expected planned, arena, pool or direct");
}

std::string to_string(Strategy strategy) {
  switch (strategy) {
    case Strategy::planned: return "planned";
    case Strategy::arena: return "arena";
    case Strategy::pool: return "pool";
    case Strategy::direct: return "direct";
  }
  return "planned";
}

std::unique_ptr<MemoryResource> make_strategy(Strategy strategy, MemoryResource& upstream,
                                              std::size_t arena_capacity) {
  switch (strategy) {
    case Strategy::direct: return std::make_unique<DirectResource>(upstream);
    case Strategy::pool: return std::make_unique<PoolResource>(upstream);
    case Strategy::arena: return std::make_unique<ArenaResource>(upstream, arena_capacity);
    case Strategy::planned: break;
  }
  throw ConfigError("the planned strategy has no resource for step buffers: the engine's plan places them");
}

}  // namespace cnn::memory
