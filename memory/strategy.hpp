#pragma once
// The resource behind each allocation strategy (memory_stack.hpp names them): the stack builds
// it, and the allocation comparison builds each in turn.
#include <cstddef>
#include <memory>

#include <cnnengine/memory/memory_stack.hpp>

namespace cnn::memory {

// The resource that serves step buffers under `strategy`, over `upstream`; the arena reserves
// `arena_capacity` now. The planned strategy has none (its arena is the engine's plan): asking
// for it is a ConfigError.
std::unique_ptr<MemoryResource> make_strategy(Strategy strategy, MemoryResource& upstream, std::size_t arena_capacity);

}  // namespace cnn::memory
