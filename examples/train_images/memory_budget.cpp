#include <cnnengine/engine/core/backend.hpp>
#include "memory_budget.hpp"

#include <iostream>

namespace cnn::app {

std::size_t memory_budget_of(const Options& o, const Backend& backend, int sharing, bool print) {
  if (!o.budget.empty()) return memory::parse_bytes(o.budget);
  const std::size_t available = backend.available_memory();
  if (available == 0) {
    if (print) std::cout << "memory budget: none (the device does not say what it has available)\n";
    return 0;
  }
  const bool host = backend.kind() == DeviceKind::cpu;
  const int shares = host && sharing > 1 ? sharing : 1;
  const auto budget = static_cast<std::size_t>(kDefaultBudgetShare * static_cast<double>(available) / shares);
  if (print)
    std::cout << "memory budget: " << memory::format_bytes(budget) << ", "
              << static_cast<int>(kDefaultBudgetShare * 100) << "% of the " << memory::format_bytes(available)
              << (host ? " this machine has available" : " free on the GPU")
              << (shares > 1 ? " over its " + std::to_string(shares) + " ranks" : std::string())
              << " (--memory-budget sets another)\n";
  return budget;
}

}  // namespace cnn::app
