#include "comparison.hpp"

#include <chrono>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <unistd.h>

#include "workloads.hpp"

namespace alloc_compare {

namespace {

using Clock = std::chrono::steady_clock;

// Runs one workload on one strategy with the given budget.
using Runner = std::function<RunResult(cnn::memory::Strategy strategy, std::size_t budget)>;

std::filesystem::path trace_path(const Options& o) {
  if (!o.trace_file.empty()) return o.trace_file;
  return std::filesystem::temp_directory_path() / ("alloc_compare_trace_" + std::to_string(::getpid()) + ".txt");
}

}  // namespace

const Row* Comparison::find(const std::string& workload, cnn::memory::Strategy strategy) const {
  for (const Row& row : rows)
    if (row.run.workload == workload && row.run.strategy == strategy) return &row;
  return nullptr;
}

Comparison run_comparison(Workbench& bench, const Options& o, std::size_t budget) {
  Comparison c;
  c.budget = budget;
  c.batch = o.batch;

  // The largest batch depends on the strategy and on whether the batch varies, not on how
  // many steps a workload runs: one search each, shared by churn and extended.
  std::map<std::pair<cnn::memory::Strategy, bool>, int> largest;
  auto largest_for = [&](cnn::memory::Strategy strategy, bool fixed_batch) {
    const auto key = std::make_pair(strategy, fixed_batch);
    if (!largest.count(key)) largest[key] = largest_batch(bench, strategy, {budget, o.batch_limit, o.search_steps, fixed_batch});
    return largest[key];
  };

  for (const std::string& workload : o.workloads) {
    Runner runner;
    std::optional<RecordedTrace> trace;
    bool fixed_batch = false, searchable = true;
    if (workload == "steady") {
      runner = [&](cnn::memory::Strategy s, std::size_t b) { return run_steady(bench, s, {o.batch, o.steady_steps, b}); };
      fixed_batch = true;
    } else if (workload == "churn" || workload == "extended") {
      const long steps = workload == "churn" ? o.churn_steps : o.extended_steps;
      runner = [&, steps, workload](cnn::memory::Strategy s, std::size_t b) {
        return run_churn(bench, s, {workload, o.batch, steps, false, b, false});
      };
    } else {  // replay
      const auto path = trace_path(o);
      std::cerr << "replay: recording " << o.replay_steps << " training steps to " << path.string() << "\n";
      trace = record_training_trace(bench, o.batch, o.replay_steps, path);
      if (o.trace_file.empty()) std::filesystem::remove(path);
      runner = [&](cnn::memory::Strategy s, std::size_t b) { return run_replay(bench, *trace, s, b); };
      searchable = false;  // a trace has one batch
    }
    for (const std::string& word : o.strategies) {
      const cnn::memory::Strategy strategy = cnn::memory::parse_strategy(word);
      const auto start = Clock::now();
      Row row;
      row.run = runner(strategy, 0);
      if (budget) {
        row.under_budget = runner(strategy, budget);
        if (searchable) row.largest_batch = largest_for(strategy, fixed_batch);
        if (searchable && strategy == cnn::memory::Strategy::planned)
          row.confirmed = confirm_by_running(bench, strategy, {budget, o.batch_limit, o.search_steps, fixed_batch},
                                             row.largest_batch);
      }
      std::cerr << workload << " / " << word << ": " << row.run.steps.size() << " steps, "
                << std::chrono::duration<double>(Clock::now() - start).count() << " s\n";
      c.rows.push_back(std::move(row));
    }
  }
  return c;
}

}  // namespace alloc_compare
