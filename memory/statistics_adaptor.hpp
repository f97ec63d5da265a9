#pragma once
// Counts what passes through: current and peak bytes, overall and per category, and calls.
// Placed between a strategy and its upstream, its counts are the strategy's upstream calls.
// It remembers each live block, so a foreign pointer or a wrong size is refused, not counted.
#include <cstddef>
#include <mutex>

#include "memory/adaptor.hpp"
#include "memory/live_blocks.hpp"
#include <cnnengine/memory/memory_resource.hpp>

namespace cnn::memory {

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
