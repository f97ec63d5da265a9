#pragma once
// Samples the fragmentation of the resource below, 1 − largest free block / total free, at each
// step's fullest moment: that is when a request can fail for want of one block large enough
// although enough bytes are free. Between steps a coalescing strategy is mostly one free block
// and would always read near 0.
#include <cstddef>

#include "memory/adaptor.hpp"

namespace alloc_compare {

class PeakProbe final : public cnn::memory::Adaptor {
 public:
  explicit PeakProbe(cnn::memory::MemoryResource& upstream) : Adaptor(upstream) {}

  void begin_step() {
    step_high_ = live_;
    fragmentation_ = sample();
  }
  // At the moment this step held the most bytes through the probe.
  double fragmentation() const { return fragmentation_; }

 private:
  double sample() const {
    const std::size_t free = upstream_.free_bytes();
    return free == 0 ? 0.0 : 1.0 - static_cast<double>(upstream_.largest_free_block()) / static_cast<double>(free);
  }

  // Single-threaded: the engine allocates step buffers from the thread that runs the step.
  void* do_allocate(std::size_t bytes, std::size_t alignment, cnn::memory::Category category) override {
    void* ptr = upstream_.allocate(bytes, alignment, category);
    live_ += bytes;
    if (live_ > step_high_) {
      step_high_ = live_;
      fragmentation_ = sample();
    }
    return ptr;
  }
  void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment,
                     cnn::memory::Category category) override {
    upstream_.deallocate(ptr, bytes, alignment, category);
    live_ -= bytes;
  }

  std::size_t live_ = 0;
  std::size_t step_high_ = 0;
  double fragmentation_ = 0.0;
};

}  // namespace alloc_compare
