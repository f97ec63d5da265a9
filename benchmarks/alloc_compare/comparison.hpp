#pragma once
// Runs every selected workload on every selected strategy: once without a budget (the figures),
// once under --budget (out-of-memory counts), and the largest batch that fits the budget.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "largest_batch.hpp"
#include "options.hpp"
#include "run_result.hpp"
#include "workbench.hpp"

namespace alloc_compare {

struct Row {
  RunResult run;                          // no budget
  std::optional<RunResult> under_budget;  // with --budget
  int largest_batch = -1;                 // under the budget; -1: not computed
  std::optional<Confirmation> confirmed;  // planned: its largest batch run for real
};

struct Comparison {
  std::vector<Row> rows;  // by workload, then strategy
  std::size_t budget = 0;
  int batch = 0;

  const Row* find(const std::string& workload, cnn::memory::Strategy strategy) const;
};

Comparison run_comparison(Workbench& bench, const Options& options, std::size_t budget);

}  // namespace alloc_compare
