#pragma once
// The naive baseline strategy: every request is one upstream call, every release one free.
// It remembers each live block only to refuse a foreign pointer or a wrong size.
#include <mutex>
#include "memory/live_blocks.hpp"
#include <cnnengine/memory/memory_resource.hpp>

namespace cnn::memory {

class DirectResource final : public MemoryResource {
 public:
  explicit DirectResource(MemoryResource& upstream) : upstream_(upstream) {}
  DirectResource(const DirectResource&) = delete;
  DirectResource& operator=(const DirectResource&) = delete;
  ~DirectResource() override;  // frees what is still live

  MemoryResource& upstream() const { return upstream_; }
  std::size_t largest_free_block() const override { return upstream_.largest_free_block(); }
  std::size_t free_bytes() const override { return upstream_.free_bytes(); }
  bool is_device_memory() const override { return upstream_.is_device_memory(); }
  std::string name() const override { return "direct(" + upstream_.name() + ")"; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, Category category) override;
  void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment, Category) override;

  MemoryResource& upstream_;
  mutable std::mutex mutex_;
  LiveBlocks live_;
};

}  // namespace cnn::memory
