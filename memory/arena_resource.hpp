#pragma once
// One reservation made up front, best fit inside it (512-byte size classes, splitting and
// coalescing), never grows: a request that does not fit is an OutOfMemory that says how much is
// free and how fragmented it is.
#include <cstddef>
#include <mutex>

#include "memory/block_heap.hpp"
#include <cnnengine/memory/memory_resource.hpp>

namespace cnn::memory {

class ArenaResource final : public MemoryResource {
 public:
  // Reserves `capacity` (rounded up to 512 bytes) from the upstream now, under `category`.
  // Throws ConfigError for a zero capacity; the upstream's OutOfMemory passes through.
  ArenaResource(MemoryResource& upstream, std::size_t capacity,
                Category category = Category::other);
  ArenaResource(const ArenaResource&) = delete;
  ArenaResource& operator=(const ArenaResource&) = delete;
  ~ArenaResource() override;

  std::size_t capacity() const { return capacity_; }
  CategoryBytes in_use() const;
  MemoryResource& upstream() const { return upstream_; }

  std::size_t largest_free_block() const override;
  std::size_t free_bytes() const override;
  bool is_device_memory() const override { return upstream_.is_device_memory(); }
  std::string name() const override { return "arena(" + upstream_.name() + ")"; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, Category category) override;
  void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment, Category) override;

  MemoryResource& upstream_;
  std::size_t capacity_;
  Category category_;
  void* base_ = nullptr;
  mutable std::mutex mutex_;
  BlockHeap heap_;
  CategoryBytes in_use_;
};

}  // namespace cnn::memory
