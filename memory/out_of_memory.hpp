#pragma once
// The typed failure of any resource: what was asked, what was in use by category, and how
// fragmented the free space was, so the message alone explains the failure. And its form before
// anything runs, BudgetTooSmall: a plan that does not fit the budget.
#include <cstddef>
#include <string>
#include <utility>

#include <cnnengine/base/error.hpp>
#include <cnnengine/memory/memory_resource.hpp>

namespace cnn::memory {

struct OutOfMemoryDetails {
  std::size_t requested = 0;
  Category category = Category::other;
  std::size_t limit = 0;               // the budget or capacity that was hit (0: unknown)
  CategoryBytes in_use;                // live bytes by category when the request failed
  std::size_t largest_free_block = 0;  // 0 when the resource cannot tell
  std::size_t total_free = 0;
  std::string resource;                // which resource refused

  // 1 - largest free / total free: 0 when all free space is one block.
  double fragmentation() const {
    return total_free == 0 ? 0.0
                           : 1.0 - static_cast<double>(largest_free_block) /
                                       static_cast<double>(total_free);
  }
};

class OutOfMemory : public Error {
 public:
  explicit OutOfMemory(OutOfMemoryDetails details);
  OutOfMemory(std::string message, OutOfMemoryDetails details);
  const OutOfMemoryDetails& details() const { return details_; }

 private:
  OutOfMemoryDetails details_;
};

std::string describe(const OutOfMemoryDetails& details);

}  // namespace cnn::memory

namespace cnn {

// The refusal before anything runs: the plan cannot fit the budget even at the smallest
// micro-batch. A trainer and a predictor both refuse so, with the byte table in the message.
class BudgetTooSmall : public memory::OutOfMemory {
 public:
  BudgetTooSmall(std::string message, memory::OutOfMemoryDetails details)
      : OutOfMemory(std::move(message), std::move(details)) {}
};

}  // namespace cnn
