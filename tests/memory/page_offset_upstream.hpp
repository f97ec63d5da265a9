#pragma once
// Test helper: an upstream that behaves like cudaMalloc as far as alignment goes. Every block
// starts exactly `offset` bytes past a 4096-byte boundary, and an alignment above 256 (all
// that cudaMalloc promises) is refused. Offset 0 gives page-aligned blocks (deterministic
// layouts); offset 256 gives the worst base a strategy may be handed.
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "memory/host_resource.hpp"
#include <cnnengine/memory/memory_resource.hpp>
#include <cnnengine/memory/out_of_memory.hpp>

namespace cnn::memory::test {

class PageOffsetUpstream final : public MemoryResource {
 public:
  explicit PageOffsetUpstream(std::size_t offset) : offset_(offset) {
    if (offset % 256 || offset >= 4096)
      throw std::invalid_argument("offset must be a multiple of 256 below 4096");
  }
  std::string name() const override { return "page+" + std::to_string(offset_); }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, Category category) override {
    if (alignment > 256) throw std::invalid_argument(name() + ": alignment above 256");
    if (bytes > SIZE_MAX / 2) {
      OutOfMemoryDetails details;
      details.requested = bytes;
      details.category = category;
      details.resource = name();
      throw OutOfMemory(details);
    }
    char* base = static_cast<char*>(host_resource().allocate(bytes + offset_, 4096, category));
    std::lock_guard lock(mutex_);
    bases_[base + offset_] = base;
    return base + offset_;
  }
  void do_deallocate(void* ptr, std::size_t bytes, std::size_t, Category category) override {
    char* base = nullptr;
    {
      std::lock_guard lock(mutex_);
      auto it = bases_.find(ptr);
      if (it == bases_.end()) throw std::invalid_argument(name() + ": foreign pointer");
      base = it->second;
      bases_.erase(it);
    }
    host_resource().deallocate(base, bytes + offset_, 4096, category);
  }

  std::size_t offset_;
  std::mutex mutex_;
  std::unordered_map<void*, char*> bases_;
};

}  // namespace cnn::memory::test
