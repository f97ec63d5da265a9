#include "memory/budget_adaptor.hpp"

#include <algorithm>

#include <cnnengine/memory/out_of_memory.hpp>

namespace cnn::memory {

BudgetAdaptor::BudgetAdaptor(MemoryResource& upstream, std::size_t budget)
    : Adaptor(upstream), account_(std::make_shared<Account>()) {
  account_->budget = budget;
}

BudgetAdaptor::BudgetAdaptor(MemoryResource& upstream, BudgetAdaptor& shared)
    : Adaptor(upstream), account_(shared.account_) {}

void* BudgetAdaptor::do_allocate(std::size_t bytes, std::size_t alignment, Category category) {
  Account& a = *account_;
  {
    // The bytes are counted before the upstream call so that concurrent requests cannot
    // together pass the cap.
    std::lock_guard lock(a.mutex);
    const std::size_t used = a.in_use.total();
    if (used > a.budget || bytes > a.budget - used) refuse(bytes, category);
    a.in_use[category] += bytes;
  }
  void* ptr = nullptr;
  try {
    ptr = upstream_.allocate(bytes, alignment, category);
  } catch (...) {
    std::lock_guard lock(a.mutex);
    a.in_use[category] -= bytes;
    throw;
  }
  std::lock_guard lock(a.mutex);
  live_.add(ptr, {bytes, alignment, category});
  a.peak = std::max(a.peak, a.in_use.total());  // only what the upstream did give
  return ptr;
}

// Called with the account's mutex held.
void BudgetAdaptor::refuse(std::size_t bytes, Category category) const {
  OutOfMemoryDetails details;
  details.requested = bytes;
  details.category = category;
  details.limit = account_->budget;
  details.in_use = account_->in_use;
  details.largest_free_block = upstream_.largest_free_block();
  details.total_free = upstream_.free_bytes();
  details.resource = name();
  throw OutOfMemory(details);
}

void BudgetAdaptor::do_deallocate(void* ptr, std::size_t bytes, std::size_t, Category) {
  Account& a = *account_;
  LiveBlock live;
  {
    // Forgotten before the upstream frees it: the address may be handed out again at once.
    std::lock_guard lock(a.mutex);
    live = live_.remove(ptr, bytes, *this);
  }
  try {
    // The upstream is told the alignment it was asked for, whatever the caller says now.
    upstream_.deallocate(ptr, bytes, live.alignment, live.category);
  } catch (...) {
    std::lock_guard lock(a.mutex);
    live_.add(ptr, live);
    throw;
  }
  std::lock_guard lock(a.mutex);
  a.in_use[live.category] -= bytes;
}

std::size_t BudgetAdaptor::budget() const {
  std::lock_guard lock(account_->mutex);
  return account_->budget;
}

void BudgetAdaptor::set_budget(std::size_t budget) {
  std::lock_guard lock(account_->mutex);
  account_->budget = budget;
}

CategoryBytes BudgetAdaptor::in_use() const {
  std::lock_guard lock(account_->mutex);
  return account_->in_use;
}

std::size_t BudgetAdaptor::peak_bytes() const {
  std::lock_guard lock(account_->mutex);
  return account_->peak;
}

std::size_t BudgetAdaptor::headroom() const {
  std::lock_guard lock(account_->mutex);
  const std::size_t used = account_->in_use.total();
  return used >= account_->budget ? 0 : account_->budget - used;
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
