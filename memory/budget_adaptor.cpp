#include "cnnengine/memory/budget_adaptor.hpp"

#include <algorithm>

#include "cnnengine/memory/out_of_memory.hpp"

namespace cnn::memory {

void* BudgetAdaptor::do_allocate(std::size_t bytes, std::size_t alignment, Category category) {
  {
    // The bytes are counted before the upstream call so that concurrent requests cannot
    // together pass the cap.
    std::lock_guard lock(mutex_);
    const std::size_t used = in_use_.total();
    if (used > budget_ || bytes > budget_ - used) refuse(bytes, category);
    in_use_[category] += bytes;
  }
  void* ptr = nullptr;
  try {
    ptr = upstream_.allocate(bytes, alignment, category);
  } catch (...) {
    std::lock_guard lock(mutex_);
    in_use_[category] -= bytes;
    throw;
  }
  std::lock_guard lock(mutex_);
  live_.add(ptr, {bytes, alignment, category});
  peak_ = std::max(peak_, in_use_.total());  // only what the upstream did give
  return ptr;
}

void BudgetAdaptor::refuse(std::size_t bytes, Category category) const {
  OutOfMemoryDetails details;
  details.requested = bytes;
  details.category = category;
  details.limit = budget_;
  details.in_use = in_use_;
  details.largest_free_block = upstream_.largest_free_block();
  details.total_free = upstream_.free_bytes();
  details.resource = name();
  throw OutOfMemory(details);
}

void BudgetAdaptor::do_deallocate(void* ptr, std::size_t bytes, std::size_t, Category) {
  LiveBlock live;
  {
    // Forgotten before the upstream frees it: the address may be handed out again at once.
    std::lock_guard lock(mutex_);
    live = live_.remove(ptr, bytes, *this);
  }
  try {
    // The upstream is told the alignment it was asked for, whatever the caller says now.
    upstream_.deallocate(ptr, bytes, live.alignment, live.category);
  } catch (...) {
    std::lock_guard lock(mutex_);
    live_.add(ptr, live);
    throw;
  }
  std::lock_guard lock(mutex_);
  in_use_[live.category] -= bytes;
}

std::size_t BudgetAdaptor::budget() const {
  std::lock_guard lock(mutex_);
  return budget_;
}

void BudgetAdaptor::set_budget(std::size_t budget) {
  std::lock_guard lock(mutex_);
  budget_ = budget;
}

CategoryBytes BudgetAdaptor::in_use() const {
  std::lock_guard lock(mutex_);
  return in_use_;
}

std::size_t BudgetAdaptor::peak_bytes() const {
  std::lock_guard lock(mutex_);
  return peak_;
}

std::size_t BudgetAdaptor::headroom() const {
  std::lock_guard lock(mutex_);
  const std::size_t used = in_use_.total();
  return used >= budget_ ? 0 : budget_ - used;
}

std::size_t BudgetAdaptor::largest_free_block() const {
  const std::size_t upstream = upstream_.largest_free_block();
  return upstream ? std::min(upstream, headroom()) : 0;
}

std::size_t BudgetAdaptor::free_bytes() const {
  const std::size_t upstream = upstream_.free_bytes();
  return upstream ? std::min(upstream, headroom()) : 0;
}

}  // namespace cnn::memory
