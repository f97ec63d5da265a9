#include "memory/pool_resource.hpp"

#include <algorithm>
#include <string>

#include <cnnengine/base/error.hpp>
#include "memory/buffer.hpp"
#include "memory/detail/alignment.hpp"
#include <cnnengine/memory/memory_resource.hpp>
#include <cnnengine/memory/out_of_memory.hpp>

namespace cnn::memory {

PoolResource::PoolResource(MemoryResource& upstream, PoolOptions options)
    : upstream_(upstream), options_(options) {
  if (options_.growth == 0) throw ConfigError("pool: growth must be positive");
  options_.growth = BlockHeap::round(options_.growth);
  options_.large_growth = BlockHeap::round(std::max(options_.large_growth, options_.growth));
}

PoolResource::~PoolResource() {
  for (BlockHeap* heap : {&small_, &large_})
    for (const auto& chunk : heap->remove_all_chunks())
      give_back(upstream_, chunk.base, chunk.bytes, BlockHeap::kChunkAlignment, chunk.category);
}

std::size_t PoolResource::chunk_size(std::size_t needed) const {
  if (!is_small(needed) && needed < options_.large_growth / 2) return options_.large_growth;
  return smallest_chunk(needed);
}

std::size_t PoolResource::smallest_chunk(std::size_t needed) const {
  return is_small(needed) ? std::max(options_.growth, BlockHeap::round(needed)) : align_up(needed, options_.growth);
}

std::size_t PoolResource::release_free_chunks() {
  std::size_t released = 0;
  for (BlockHeap* heap : {&small_, &large_})
    for (const auto& chunk : heap->remove_free_chunks()) {
      upstream_.deallocate(chunk.base, chunk.bytes, BlockHeap::kChunkAlignment, chunk.category);
      released += chunk.bytes;
    }
  return released;
}

void* PoolResource::do_allocate(std::size_t bytes, std::size_t alignment, Category category) {
  check_alignment(alignment, *this);
  const std::size_t rounded = BlockHeap::round(bytes);
  std::lock_guard lock(mutex_);
  if (rounded > kMaxChunk) refuse(bytes, category, "; no chunk can be that large");
  BlockHeap& heap = is_small(rounded) ? small_ : large_;
  void* ptr = heap.take(bytes, alignment, category);
  if (!ptr) {
    // Room for the padding an alignment above the chunks' own may need: the fresh chunk then
    // holds the request wherever its base lies, and the second take cannot fail.
    const std::size_t padding =
        alignment > BlockHeap::kChunkAlignment ? alignment - BlockHeap::kChunkAlignment : 0;
    grow(heap, bytes, rounded + padding, category);
    ptr = heap.take(bytes, alignment, category);
  }
  in_use_[category] += bytes;
  return ptr;
}

void PoolResource::grow(BlockHeap& heap, std::size_t bytes, std::size_t needed,
                        Category category) {
  // When the upstream refuses the usual chunk: a chunk of just the request (TensorFlow's BFC
  // backs off so), then the same after giving back every cached chunk that holds no live block
  // (PyTorch empties its cache so before it reports out of memory).
  const std::size_t least = smallest_chunk(needed);
  std::size_t chunk = chunk_size(needed);
  std::string refusal;
  auto try_upstream = [&]() -> void* {
    try {
      return upstream_.allocate(chunk, BlockHeap::kChunkAlignment, category);
    } catch (const OutOfMemory& failure) {
      refusal = failure.what();
      return nullptr;
    }
  };
  void* base = try_upstream();
  if (!base && chunk > least) {
    chunk = least;
    base = try_upstream();
  }
  if (!base && release_free_chunks() > 0) base = try_upstream();
  if (!base) refuse(bytes, category, "; the upstream refused a new chunk of " + format_bytes(chunk) + ": " + refusal);
  try {
    heap.add_chunk({base, chunk, category});
  } catch (...) {
    upstream_.deallocate(base, chunk, BlockHeap::kChunkAlignment, category);
    throw;
  }
  ++upstream_allocations_;
}

void PoolResource::refuse(std::size_t bytes, Category category, const std::string& why) const {
  OutOfMemoryDetails details;
  details.requested = bytes;
  details.category = category;
  details.in_use = in_use_;
  details.largest_free_block = largest_free_locked();
  details.total_free = small_.free_bytes() + large_.free_bytes();
  details.resource = name();
  throw OutOfMemory(describe(details) + why, details);
}

void PoolResource::do_deallocate(void* ptr, std::size_t bytes, std::size_t, Category) {
  std::lock_guard lock(mutex_);
  BlockHeap* heap = small_.holds_live(ptr) ? &small_ : large_.holds_live(ptr) ? &large_ : nullptr;
  if (!heap) throw ConfigError(name() + ": deallocate of a pointer it did not allocate");
  const auto released = heap->give_back(ptr, bytes);
  in_use_[released.category] -= bytes;
}

void PoolResource::release() {
  std::lock_guard lock(mutex_);
  release_free_chunks();
}

std::size_t PoolResource::largest_free_locked() const {
  // Large requests are served only from the large pool, small ones only from the small pool.
  const std::size_t large = large_.largest_free();
  if (large > options_.small_limit) return large;
  return std::min(small_.largest_free(), options_.small_limit);
}

std::size_t PoolResource::largest_free_block() const {
  std::lock_guard lock(mutex_);
  return largest_free_locked();
}

std::size_t PoolResource::free_bytes() const {
  std::lock_guard lock(mutex_);
  return small_.free_bytes() + large_.free_bytes();
}

std::size_t PoolResource::reserved_bytes() const {
  std::lock_guard lock(mutex_);
  return small_.reserved_bytes() + large_.reserved_bytes();
}

PoolStats PoolResource::stats() const {
  std::lock_guard lock(mutex_);
  PoolStats s;
  s.reserved_bytes = small_.reserved_bytes() + large_.reserved_bytes();
  s.free_bytes = small_.free_bytes() + large_.free_bytes();
  s.largest_free_block = largest_free_locked();
  s.chunks = small_.chunk_count() + large_.chunk_count();
  s.free_blocks = small_.free_block_count() + large_.free_block_count();
  s.live_blocks = small_.live_block_count() + large_.live_block_count();
  s.upstream_allocations = upstream_allocations_;
  s.in_use = in_use_;
  return s;
}

}  // namespace cnn::memory
