#include "memory/direct_resource.hpp"

#include <stdexcept>

#include "memory/alignment.hpp"

namespace cnn::memory {

DirectResource::~DirectResource() {
  for (const auto& [ptr, live] : live_)
    upstream_.deallocate(ptr, live.bytes, live.alignment, live.category);
}

void* DirectResource::do_allocate(std::size_t bytes, std::size_t alignment, Category category) {
  check_alignment(alignment, name());
  void* ptr = upstream_.allocate(bytes, alignment, category);
  try {
    std::lock_guard lock(mutex_);
    live_.emplace(ptr, Live{bytes, alignment, category});
  } catch (...) {
    upstream_.deallocate(ptr, bytes, alignment, category);
    throw;
  }
  return ptr;
}

void DirectResource::do_deallocate(void* ptr, std::size_t bytes, std::size_t, Category) {
  Live live;
  {
    std::lock_guard lock(mutex_);
    auto it = live_.find(ptr);
    if (it == live_.end())
      throw std::invalid_argument(name() + ": deallocate of a pointer it did not allocate");
    if (it->second.bytes != bytes)
      throw std::invalid_argument(name() + ": block was allocated with " +
                                  std::to_string(it->second.bytes) + " bytes, freed with " +
                                  std::to_string(bytes));
    live = it->second;
    live_.erase(it);
  }
  // The upstream is told what it was asked for, whatever alignment the caller passes now.
  upstream_.deallocate(ptr, live.bytes, live.alignment, live.category);
}

}  // namespace cnn::memory
