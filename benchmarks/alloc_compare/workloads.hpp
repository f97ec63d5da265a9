#pragma once
// The workloads, each run on one strategy at a time:
//  - steady: real training steps (the backend computes) through the Trainer at a fixed batch;
//  - churn: the allocation sequence of training steps whose batch is drawn from [B/2, B], no
//    compute (extended is the same for 10,000 steps);
//  - replay: a recorded training run's trace, replayed step by step.
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "memory/trace.hpp"
#include "run_result.hpp"
#include "workbench.hpp"

namespace alloc_compare {

struct SteadySpec {
  int batch = 64;
  int steps = 20;
  std::size_t budget = 0;
};
RunResult run_steady(Workbench& bench, cnn::memory::Strategy strategy, const SteadySpec& spec);

struct ChurnSpec {
  std::string workload = "churn";  // the name in the results
  int batch = 64;                  // B
  long steps = 2000;
  bool fixed_batch = false;        // every step at B (the steady sequence without compute)
  std::size_t budget = 0;
  bool stop_at_first_oom = false;  // enough to know the batch does not fit
};
RunResult run_churn(Workbench& bench, cnn::memory::Strategy strategy, const ChurnSpec& spec);

struct RecordedTrace {
  std::filesystem::path file;
  int batch = 0;
  std::vector<cnn::memory::TraceEvent> setup;               // before step 1: the persistent blocks
  std::vector<std::vector<cnn::memory::TraceEvent>> steps;  // one slice per training step
  std::vector<cnn::memory::TraceEvent> teardown;            // after the last step
};
// Trains `steps` steps at `batch` through a TraceAdaptor writing `file`, then reads it back.
RecordedTrace record_training_trace(Workbench& bench, int batch, int steps, const std::filesystem::path& file);
RunResult run_replay(Workbench& bench, const RecordedTrace& trace, cnn::memory::Strategy strategy, std::size_t budget);

}  // namespace alloc_compare
