#include "memory/direct_resource.hpp"

#include "memory/buffer.hpp"
#include "memory/detail/alignment.hpp"

namespace cnn::memory {

DirectResource::~DirectResource() {
  for (const auto& [ptr, live] : live_.all()) give_back(upstream_, ptr, live.bytes, live.alignment, live.category);
}

void* DirectResource::do_allocate(std::size_t bytes, std::size_t alignment, Category category) {
  check_alignment(alignment, *this);
  void* ptr = upstream_.allocate(bytes, alignment, category);
  try {
    std::lock_guard lock(mutex_);
    live_.add(ptr, {bytes, alignment, category});
  } catch (...) {
    upstream_.deallocate(ptr, bytes, alignment, category);
    throw;
  }
  return ptr;
}

void DirectResource::do_deallocate(void* ptr, std::size_t bytes, std::size_t, Category) {
  LiveBlock live;
  {
    std::lock_guard lock(mutex_);
    live = live_.remove(ptr, bytes, *this);
  }
  // The upstream is told what it was asked for, whatever alignment the caller passes now.
  upstream_.deallocate(ptr, live.bytes, live.alignment, live.category);
}

}  // namespace cnn::memory
