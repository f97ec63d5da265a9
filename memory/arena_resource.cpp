#include "memory/arena_resource.hpp"

#include <cnnengine/base/error.hpp>
#include "memory/buffer.hpp"
#include "memory/detail/alignment.hpp"
#include <cnnengine/memory/out_of_memory.hpp>

namespace cnn::memory {

ArenaResource::ArenaResource(MemoryResource& upstream, std::size_t capacity, Category category)
    : upstream_(upstream), capacity_(BlockHeap::round(capacity)), category_(category) {
  if (capacity == 0) throw ConfigError("arena: capacity must be positive");
  base_ = upstream_.allocate(capacity_, BlockHeap::kChunkAlignment, category_);
  try {
    heap_.add_chunk({base_, capacity_, category_});
  } catch (...) {
    upstream_.deallocate(base_, capacity_, BlockHeap::kChunkAlignment, category_);
    throw;
  }
}

ArenaResource::~ArenaResource() { give_back(upstream_, base_, capacity_, BlockHeap::kChunkAlignment, category_); }

void* ArenaResource::do_allocate(std::size_t bytes, std::size_t alignment, Category category) {
  check_alignment(alignment, *this);
  std::lock_guard lock(mutex_);
  void* ptr = heap_.take(bytes, alignment, category);
  if (!ptr) {
    OutOfMemoryDetails details;
    details.requested = bytes;
    details.category = category;
    details.limit = capacity_;
    details.in_use = in_use_;
    details.largest_free_block = heap_.largest_free();
    details.total_free = heap_.free_bytes();
    details.resource = name();
    throw OutOfMemory(details);
  }
  in_use_[category] += bytes;
  return ptr;
}

void ArenaResource::do_deallocate(void* ptr, std::size_t bytes, std::size_t, Category) {
  std::lock_guard lock(mutex_);
  if (!heap_.holds_live(ptr))
    throw ConfigError(name() + ": deallocate of a pointer it did not allocate");
  in_use_[heap_.give_back(ptr, bytes).category] -= bytes;
}

CategoryBytes ArenaResource::in_use() const {
  std::lock_guard lock(mutex_);
  return in_use_;
}

std::size_t ArenaResource::largest_free_block() const {
  std::lock_guard lock(mutex_);
  return heap_.largest_free();
}

std::size_t ArenaResource::free_bytes() const {
  std::lock_guard lock(mutex_);
  return heap_.free_bytes();
}

}  // namespace cnn::memory
