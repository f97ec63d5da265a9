#pragma once
// What a statistics adaptor counts (memory/statistics_adaptor.hpp): current and peak bytes,
// overall and per category, and calls. A memory stack reports its own so.
#include <cstddef>

#include "memory/category.hpp"

namespace cnn::memory {

struct Statistics {
  std::size_t current_bytes = 0;
  std::size_t peak_bytes = 0;
  CategoryBytes current_by_category;
  CategoryBytes peak_by_category;      // each category's own peak
  std::size_t allocations = 0;         // successful allocate calls
  std::size_t deallocations = 0;
  std::size_t failed_allocations = 0;  // allocate calls the upstream refused
  std::size_t allocated_bytes_total = 0;
  std::size_t largest_free_block = 0;  // of the upstream, when the snapshot was taken
  std::size_t free_bytes = 0;          // of the upstream, when the snapshot was taken

  std::size_t live_blocks() const { return allocations - deallocations; }
};

}  // namespace cnn::memory
