#pragma once
// The blocks a resource has handed out and not yet taken back, so that a deallocate of a
// foreign pointer or with the wrong size is refused instead of corrupting anything.
// Not thread-safe: its owners lock around it.
#include <cstddef>
#include <cstdint>
#include <unordered_map>

#include <cnnengine/memory/memory_resource.hpp>

namespace cnn::memory {

struct LiveBlock {
  std::size_t bytes = 0;
  std::size_t alignment = 0;
  Category category = Category::other;
  std::uint64_t id = 0;  // for owners that name blocks (the trace)
};

class LiveBlocks {
 public:
  void add(void* ptr, const LiveBlock& block) { blocks_.emplace(ptr, block); }

  // Forgets the block and returns what it was allocated with. Throws ConfigError
  // naming `owner` when `ptr` is not live here or `bytes` differs from its allocation.
  LiveBlock remove(void* ptr, std::size_t bytes, const MemoryResource& owner);

  std::size_t size() const { return blocks_.size(); }
  const std::unordered_map<void*, LiveBlock>& all() const { return blocks_; }

 private:
  std::unordered_map<void*, LiveBlock> blocks_;
};

}  // namespace cnn::memory
