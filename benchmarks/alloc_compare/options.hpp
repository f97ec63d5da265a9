#pragma once
// The command line of alloc_compare (parsed in main.cpp).
#include <cstdint>
#include <string>
#include <vector>

namespace alloc_compare {

struct Options {
  std::string preset = "small";
  std::string input = "1x28x28";  // CxHxW
  int classes = 10;
  int batch = 64;                 // B
  std::vector<std::string> workloads{"steady", "churn", "extended", "replay"};
  std::vector<std::string> strategies{"planned", "arena", "pool", "direct"};
  int steady_steps = 20;
  long churn_steps = 2000;
  long extended_steps = 10000;
  int replay_steps = 20;
  int warmup = 1;
  std::string budget;             // empty: none
  int batch_limit = 1024;
  long search_steps = 200;
  double arena_factor = 2.0;
  std::uint64_t seed = 1;
  int threads = 0;
  std::string device = "cpu";
  std::string out = "alloc_compare_results";
  std::string trace_file;         // empty: a temporary file, removed afterwards
  int series_stride = 1;
  bool plot = true;
};

}  // namespace alloc_compare
