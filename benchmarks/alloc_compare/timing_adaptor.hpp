#pragma once
// Meters the resource it wraps: the wall time spent inside allocate and deallocate (the
// allocator's own cost, apart from the work between the calls) and the requests it refused.
#include <atomic>
#include <chrono>
#include <cstdint>

#include "memory/adaptor.hpp"
#include <cnnengine/memory/out_of_memory.hpp>

namespace alloc_compare {

class TimingAdaptor final : public cnn::memory::Adaptor {
 public:
  explicit TimingAdaptor(cnn::memory::MemoryResource& upstream) : Adaptor(upstream) {}

  std::uint64_t nanoseconds() const { return nanoseconds_.load(std::memory_order_relaxed); }
  std::uint64_t refusals() const { return refusals_.load(std::memory_order_relaxed); }

 private:
  using Clock = std::chrono::steady_clock;

  // Adds the time since construction, also when the call throws.
  class Stopwatch {
   public:
    explicit Stopwatch(std::atomic<std::uint64_t>& sum) : sum_(sum), start_(Clock::now()) {}
    ~Stopwatch() {
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start_);
      sum_.fetch_add(static_cast<std::uint64_t>(ns.count()), std::memory_order_relaxed);
    }
    Stopwatch(const Stopwatch&) = delete;
    Stopwatch& operator=(const Stopwatch&) = delete;

   private:
    std::atomic<std::uint64_t>& sum_;
    Clock::time_point start_;
  };

  void* do_allocate(std::size_t bytes, std::size_t alignment, cnn::memory::Category category) override {
    try {
      Stopwatch watch(nanoseconds_);
      return upstream_.allocate(bytes, alignment, category);
    } catch (const cnn::memory::OutOfMemory&) {
      refusals_.fetch_add(1, std::memory_order_relaxed);
      throw;
    }
  }
  void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment,
                     cnn::memory::Category category) override {
    Stopwatch watch(nanoseconds_);
    upstream_.deallocate(ptr, bytes, alignment, category);
  }

  std::atomic<std::uint64_t> nanoseconds_{0};
  std::atomic<std::uint64_t> refusals_{0};
};

}  // namespace alloc_compare
