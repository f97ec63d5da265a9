#pragma once
// The caching strategy, as PyTorch's CUDA caching allocator and TensorFlow's BFC allocator do it:
// requests are rounded to 512-byte size classes and served best-fit from chunks taken from the
// upstream, splitting a larger free block; a freed block merges with its free neighbours in the
// same chunk. Small requests (<= small_limit) live in chunks of their own so that they do not
// fragment the chunks that hold large blocks. The pool grows by one upstream call when nothing
// fits; when the upstream refuses, it asks for just the request, then gives back its empty
// chunks and asks once more. Otherwise it gives memory back only on release() or destruction.
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "memory/block_heap.hpp"
#include <cnnengine/memory/memory_resource.hpp>

namespace cnn::memory {

struct PoolOptions {
  std::size_t growth = std::size_t{2} << 20;        // smallest chunk; large chunks round up to it
  std::size_t small_limit = std::size_t{1} << 20;   // requests up to this use the small pool
  // A large request below half of this gets a chunk of this size, so that a run of mid-sized
  // requests shares a few chunks instead of taking one each (PyTorch: 10 MiB -> 20 MiB).
  std::size_t large_growth = std::size_t{20} << 20;
};

struct PoolStats {
  std::size_t reserved_bytes = 0;      // sum of the chunks held from the upstream
  std::size_t free_bytes = 0;          // free inside them, in any number of blocks
  std::size_t largest_free_block = 0;  // largest request served without growing
  std::size_t chunks = 0;
  std::size_t free_blocks = 0;         // after a full release: one per chunk when coalescing works
  std::size_t live_blocks = 0;
  std::size_t upstream_allocations = 0;  // chunks ever taken
  CategoryBytes in_use;                // requested bytes live, by category
};

class PoolResource final : public MemoryResource {
 public:
  explicit PoolResource(MemoryResource& upstream, PoolOptions options = {});
  PoolResource(const PoolResource&) = delete;
  PoolResource& operator=(const PoolResource&) = delete;
  ~PoolResource() override;  // returns every chunk to the upstream

  // Returns the chunks that hold no live block to the upstream.
  void release();
  PoolStats stats() const;
  std::size_t reserved_bytes() const;
  const PoolOptions& options() const { return options_; }
  MemoryResource& upstream() const { return upstream_; }

  std::size_t largest_free_block() const override;
  std::size_t free_bytes() const override;
  bool is_device_memory() const override { return upstream_.is_device_memory(); }
  std::string name() const override { return "pool(" + upstream_.name() + ")"; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, Category category) override;
  void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment, Category) override;

  bool is_small(std::size_t rounded) const { return rounded <= options_.small_limit; }
  std::size_t chunk_size(std::size_t needed) const;      // the chunk it usually takes
  std::size_t smallest_chunk(std::size_t needed) const;  // the least that holds `needed`
  std::size_t release_free_chunks();                     // with mutex_ held; bytes given back
  std::size_t largest_free_locked() const;
  // Adds a chunk of at least `needed` bytes to `heap`.
  void grow(BlockHeap& heap, std::size_t bytes, std::size_t needed, Category category);
  // Throws the pool's OutOfMemory (with mutex_ held); `why` is appended to the description.
  [[noreturn]] void refuse(std::size_t bytes, Category category, const std::string& why) const;

  // Keeps chunk sizes clear of overflow when they are rounded up to the growth.
  static constexpr std::size_t kMaxChunk = SIZE_MAX / 4;

  MemoryResource& upstream_;
  PoolOptions options_;
  mutable std::mutex mutex_;
  BlockHeap small_;
  BlockHeap large_;
  CategoryBytes in_use_;
  std::size_t upstream_allocations_ = 0;
};

}  // namespace cnn::memory
