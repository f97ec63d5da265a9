#pragma once
// One interface for every source of memory (RMM's device_memory_resource is the model):
// upstreams (host, CUDA device, CUDA pinned), strategies (direct, pool, arena, planned) and
// adaptors (budget, statistics, trace, fault injection) all implement it and compose.
#include <cstddef>
#include <string>

#include "memory/category.hpp"

namespace cnn::memory {

inline constexpr std::size_t kDefaultAlignment = 256;  // cudaMalloc's guarantee; AVX-512 needs 64

class MemoryResource {
 public:
  virtual ~MemoryResource() = default;

  // Throws OutOfMemory when the request cannot be served; never returns nullptr for bytes > 0.
  void* allocate(std::size_t bytes, std::size_t alignment = kDefaultAlignment,
                 Category category = Category::other) {
    return do_allocate(bytes, alignment, category);
  }
  void deallocate(void* ptr, std::size_t bytes, std::size_t alignment = kDefaultAlignment,
                  Category category = Category::other) {
    do_deallocate(ptr, bytes, alignment, category);
  }

  // Largest single request that would succeed now without growing (0 if unknown).
  virtual std::size_t largest_free_block() const { return 0; }
  // Bytes free inside what the resource already holds, in any number of blocks (0 if unknown).
  virtual std::size_t free_bytes() const { return 0; }
  // True when memory comes from the CUDA device (kernels may touch it, the host may not).
  virtual bool is_device_memory() const { return false; }
  virtual std::string name() const = 0;

 private:
  virtual void* do_allocate(std::size_t bytes, std::size_t alignment, Category category) = 0;
  virtual void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment,
                             Category category) = 0;
};

}  // namespace cnn::memory
