#include "plan_report.hpp"

#include <iostream>

#include "cnnengine/memory/bytes.hpp"

namespace cnn::app {

int print_plan(Network& network, Backend& backend, const TrainerOptions& t) {
  const BatchPlanner planner(network, backend, planning_options(t));
  std::vector<MemoryBreakdown> rows;
  for (int b = 1; b < t.batch; b *= 2) rows.push_back(planner.breakdown(b));
  rows.push_back(planner.breakdown(t.batch));
  std::cout << format_micro_batch_table(rows);
  const int largest = planner.largest_fitting(t.batch);
  if (largest == 0) {
    std::cout << "no micro-batch fits the budget of " << memory::format_bytes(t.memory.budget) << "\n";
    return 3;
  }
  std::cout << "largest micro-batch that fits: " << largest
            << (t.memory.budget ? "" : " (no budget: the requested batch)") << "\n";
  if (planner.smallest_micro_batch() > 1)
    std::cout << "smallest micro-batch: " << planner.smallest_micro_batch() << ", because "
              << planner.training_batch_need().why << "\n";
  const int b = planner.choose();
  if (b == 0) {
    std::cout << "the micro-batch asked for does not fit the budget\n";
    return 3;
  }
  const MicroBatchSplit split = split_into_micro_batches(t.batch, b, planner.training_batch_need().samples);
  std::cout << "chosen: batch " << t.batch << " = " << split.count << " x micro-batch " << b;
  if (split.before_last != b) std::cout << " (the last two " << split.before_last << " and " << split.last << ")";
  else if (split.last != b) std::cout << " (the last one " << split.last << ")";
  std::cout << "\n" << format_memory_table(planner.breakdown(b));
  return 0;
}

}  // namespace cnn::app
