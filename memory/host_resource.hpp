#pragma once
// The host upstream: aligned operator new. Every call reaches the system allocator.
#include <cnnengine/memory/memory_resource.hpp>

namespace cnn::memory {

class HostResource final : public MemoryResource {
 public:
  std::string name() const override { return "host"; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, Category category) override;
  void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment, Category) override;
};

// One process-wide host upstream, for code that has no resource handed to it.
HostResource& host_resource();

}  // namespace cnn::memory
