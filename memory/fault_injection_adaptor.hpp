#pragma once
// Fails chosen requests with an OutOfMemory, for tests of the paths that recover from one.
// Requests are numbered from 0 over every allocate call the adaptor has seen.
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <random>
#include <set>

#include "memory/adaptor.hpp"

namespace cnn::memory {

class FaultInjectionAdaptor final : public Adaptor {
 public:
  explicit FaultInjectionAdaptor(MemoryResource& upstream) : Adaptor(upstream) {}

  // Each rule adds to the others: a request fails when any of them picks it.
  void fail_on(std::initializer_list<std::uint64_t> request_numbers);
  void fail_on(const std::set<std::uint64_t>& request_numbers);
  void fail_randomly(double probability, std::uint64_t seed);
  void fail_next(std::size_t count);
  void clear();  // no more failures

  std::uint64_t requests_seen() const;
  std::size_t injected_failures() const;


 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, Category category) override;
  void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment,
                     Category category) override;
  bool should_fail();  // with mutex_ held; advances the request counter

  mutable std::mutex mutex_;
  std::set<std::uint64_t> chosen_;
  std::size_t fail_next_ = 0;
  double probability_ = 0.0;
  std::mt19937_64 random_;
  std::uint64_t requests_ = 0;
  std::size_t injected_ = 0;
};

}  // namespace cnn::memory
