#include "plan_report.hpp"

#include <iostream>

#include "memory/bytes.hpp"

namespace cnn::app {

int print_plan(Network& network, Backend& backend, const TrainerOptions& t) {
  const BatchPlanner planner(network, backend, planning_options(t));
  std::vector<MemoryBreakdown> rows;
  for (int b = 1; b < t.batch; b *= 2) rows.push_back(planner.breakdown(b));
  rows.push_back(planner.breakdown(t.batch));
  std::cout << format_micro_batch_table(rows);
  const int largest = planner.largest_fitting(t.batch);
  if (largest == 0) {
    std::cout << "no micro-batch fits the budget of " << memory::format_bytes(t.memory_budget) << "\n";
    return 3;
  }
  std::cout << "largest micro-batch that fits: " << largest
            << (t.memory_budget ? "" : " (no budget: the requested batch)") << "\n";
  const int b = planner.choose();
  if (b == 0) {
    std::cout << "the micro-batch asked for does not fit the budget\n";
    return 3;
  }
  const int k = (t.batch + b - 1) / b;
  std::cout << "chosen: batch " << t.batch << " = " << k << " x micro-batch " << b;
  if (t.batch % b) std::cout << " (the last one " << t.batch - (k - 1) * b << ")";
  std::cout << "\n" << format_memory_table(planner.breakdown(b));
  return 0;
}

}  // namespace cnn::app
