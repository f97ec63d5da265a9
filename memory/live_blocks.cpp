#include "memory/live_blocks.hpp"

#include <string>

#include <cnnengine/base/error.hpp>

namespace cnn::memory {

LiveBlock LiveBlocks::remove(void* ptr, std::size_t bytes, const MemoryResource& owner) {
  auto it = blocks_.find(ptr);
  if (it == blocks_.end())
    throw ConfigError(owner.name() + ": deallocate of a pointer it did not allocate");
  if (it->second.bytes != bytes)
    throw ConfigError(owner.name() + ": block was allocated with " +
                                std::to_string(it->second.bytes) + " bytes, freed with " +
                                std::to_string(bytes));
  const LiveBlock block = it->second;
  blocks_.erase(it);
  return block;
}

}  // namespace cnn::memory
