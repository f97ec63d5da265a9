#pragma once
// The refusal before anything runs: the plan cannot fit the budget even at the smallest
// micro-batch. A trainer and a predictor both refuse so, with the byte table in the message.
#include <string>
#include <utility>

#include "memory/out_of_memory.hpp"

namespace cnn {

class BudgetTooSmall : public memory::OutOfMemory {
 public:
  BudgetTooSmall(std::string message, memory::OutOfMemoryDetails details)
      : OutOfMemory(std::move(message), std::move(details)) {}
};

}  // namespace cnn
