#include "memory/fault_injection_adaptor.hpp"

#include <cstdint>
#include <stdexcept>
#include <string>

#include <cnnengine/memory/out_of_memory.hpp>

namespace cnn::memory {

void FaultInjectionAdaptor::fail_on(std::initializer_list<std::uint64_t> request_numbers) {
  fail_on(std::set<std::uint64_t>(request_numbers));
}

void FaultInjectionAdaptor::fail_on(const std::set<std::uint64_t>& request_numbers) {
  std::lock_guard lock(mutex_);
  chosen_.insert(request_numbers.begin(), request_numbers.end());
}

void FaultInjectionAdaptor::fail_randomly(double probability, std::uint64_t seed) {
  if (!(probability >= 0.0 && probability <= 1.0))
    throw ConfigError("fault injection: probability must be within [0, 1]");
  std::lock_guard lock(mutex_);
  probability_ = probability;
  random_.seed(seed);
}

void FaultInjectionAdaptor::fail_next(std::size_t count) {
  std::lock_guard lock(mutex_);
  fail_next_ = count;
}

void FaultInjectionAdaptor::clear() {
  std::lock_guard lock(mutex_);
  chosen_.clear();
  fail_next_ = 0;
  probability_ = 0.0;
}

bool FaultInjectionAdaptor::should_fail() {
  const std::uint64_t number = requests_++;
  bool fail = chosen_.erase(number) > 0;
  if (fail_next_ > 0) {
    --fail_next_;
    fail = true;
  }
  // Drawn on every request while armed, so a seed gives the same failures whatever else fires.
  if (probability_ > 0.0 && std::uniform_real_distribution<double>(0.0, 1.0)(random_) < probability_)
    fail = true;
  return fail;
}

void* FaultInjectionAdaptor::do_allocate(std::size_t bytes, std::size_t alignment,
                                         Category category) {
  {
    std::lock_guard lock(mutex_);
    if (should_fail()) {
      ++injected_;
      OutOfMemoryDetails details;
      details.requested = bytes;
      details.category = category;
      details.resource = "fault injection over " + upstream_.name();
      throw OutOfMemory("injected failure of request " + std::to_string(requests_ - 1) + ": " +
                            describe(details),
                        details);
    }
  }
  return upstream_.allocate(bytes, alignment, category);
}

void FaultInjectionAdaptor::do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment,
                                          Category category) {
  upstream_.deallocate(ptr, bytes, alignment, category);
}

std::uint64_t FaultInjectionAdaptor::requests_seen() const {
  std::lock_guard lock(mutex_);
  return requests_;
}

std::size_t FaultInjectionAdaptor::injected_failures() const {
  std::lock_guard lock(mutex_);
  return injected_;
}

}  // namespace cnn::memory
