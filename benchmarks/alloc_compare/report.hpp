#pragma once
// The comparison as a text table, as CSV (one row per workload and strategy, and one per step)
// and as JSON.
#include <filesystem>
#include <string>
#include <vector>

#include "checks.hpp"
#include "comparison.hpp"
#include "options.hpp"

namespace alloc_compare {

struct RunInfo {  // where and how the comparison ran
  std::string command, date, machine, backend, upstream;
};

std::string format_table(const Comparison& comparison, const RunInfo& info);
void write_summary_csv(const Comparison& comparison, const std::filesystem::path& file);
// Every `stride`-th step of each run without a budget, and its last.
void write_steps_csv(const Comparison& comparison, const std::filesystem::path& file, int stride);
void write_json(const Comparison& comparison, const std::vector<Check>& checks, const Options& options,
                const RunInfo& info, const std::filesystem::path& file);

}  // namespace alloc_compare
