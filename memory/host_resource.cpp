#include "memory/host_resource.hpp"

#include <cstdint>
#include <new>

#include <cnnengine/memory/out_of_memory.hpp>

namespace cnn::memory {

void* HostResource::do_allocate(std::size_t bytes, std::size_t alignment, Category category) {
  if (bytes == 0) bytes = 1;
  // operator new rounds up to the alignment: a size near SIZE_MAX would wrap to a tiny block.
  void* ptr = bytes > SIZE_MAX - alignment ? nullptr : ::operator new(bytes, std::align_val_t(alignment), std::nothrow);
  if (!ptr) {
    OutOfMemoryDetails details;
    details.requested = bytes;
    details.category = category;
    details.resource = name();
    throw OutOfMemory(details);
  }
  return ptr;
}

void HostResource::do_deallocate(void* ptr, std::size_t, std::size_t alignment, Category) {
  ::operator delete(ptr, std::align_val_t(alignment));
}

HostResource& host_resource() {
  static HostResource resource;
  return resource;
}

}  // namespace cnn::memory
