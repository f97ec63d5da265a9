#pragma once
// Counts what passes through: current and peak bytes, overall and per category, and calls.
// Placed between a strategy and its upstream, its counts are the strategy's upstream calls.
// It remembers each live block, so a foreign pointer or a wrong size is refused, not counted.
#include <cstddef>
#include <mutex>

#include "memory/adaptor.hpp"
#include "memory/category.hpp"
#include "memory/live_blocks.hpp"

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

class StatisticsAdaptor final : public Adaptor {
 public:
  explicit StatisticsAdaptor(MemoryResource& upstream) : Adaptor(upstream) {}

  Statistics statistics() const;
  // Peaks restart from the current values (e.g. to measure one training step).
  void reset_peak();


 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, Category category) override;
  void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment,
                     Category category) override;

  mutable std::mutex mutex_;
  Statistics stats_;
  LiveBlocks live_;
};

}  // namespace cnn::memory
