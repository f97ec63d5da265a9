#include "memory/statistics_adaptor.hpp"

#include <algorithm>

#include <cnnengine/memory/out_of_memory.hpp>

namespace cnn::memory {

void* StatisticsAdaptor::do_allocate(std::size_t bytes, std::size_t alignment,
                                     Category category) {
  void* ptr = nullptr;
  try {
    ptr = upstream_.allocate(bytes, alignment, category);
  } catch (const OutOfMemory&) {
    std::lock_guard lock(mutex_);
    ++stats_.failed_allocations;
    throw;
  }
  std::lock_guard lock(mutex_);
  live_.add(ptr, {bytes, alignment, category});
  ++stats_.allocations;
  stats_.allocated_bytes_total += bytes;
  stats_.current_bytes += bytes;
  stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.current_bytes);
  stats_.current_by_category[category] += bytes;
  stats_.peak_by_category[category] =
      std::max(stats_.peak_by_category[category], stats_.current_by_category[category]);
  return ptr;
}

void StatisticsAdaptor::do_deallocate(void* ptr, std::size_t bytes, std::size_t,
                                      Category) {
  LiveBlock live;
  {
    std::lock_guard lock(mutex_);
    // Forgotten before the upstream frees it: once freed, another thread may be handed the
    // same address and must find no stale entry.
    live = live_.remove(ptr, bytes, *this);
    ++stats_.deallocations;
    stats_.current_bytes -= bytes;
    stats_.current_by_category[live.category] -= bytes;
  }
  try {
    // The upstream is told the alignment it was asked for, whatever the caller says now.
    upstream_.deallocate(ptr, bytes, live.alignment, live.category);
  } catch (...) {
    std::lock_guard lock(mutex_);
    live_.add(ptr, live);
    --stats_.deallocations;
    stats_.current_bytes += bytes;
    stats_.current_by_category[live.category] += bytes;
    throw;
  }
}

Statistics StatisticsAdaptor::statistics() const {
  Statistics snapshot;
  {
    std::lock_guard lock(mutex_);
    snapshot = stats_;
  }
  snapshot.largest_free_block = upstream_.largest_free_block();
  snapshot.free_bytes = upstream_.free_bytes();
  return snapshot;
}

void StatisticsAdaptor::reset_peak() {
  std::lock_guard lock(mutex_);
  stats_.peak_bytes = stats_.current_bytes;
  stats_.peak_by_category = stats_.current_by_category;
}

}  // namespace cnn::memory
