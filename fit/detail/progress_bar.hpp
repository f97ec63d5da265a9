#pragma once
// One status line: a head ("epoch 3/8", "validation"), a bar, the share done, an ETA and fields
// (loss, images/s, memory). Redrawn in place on a terminal, printed every tenth of the way
// otherwise (logs stay short). On stderr.
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace cnn::detail {

class ProgressBar {
 public:
  // `terminal_only`: drawn on a terminal, silent in a log (an evaluation's bar).
  ProgressBar(std::string head, std::size_t total, bool quiet, bool terminal_only = false);
  // `eta_seconds` < 0: none shown. `fields` follow it, the least needed last: a narrow terminal
  // keeps those that fit beside a bar of at least 10.
  void update(std::size_t done, double eta_seconds, const std::vector<std::string>& fields);
  void finish();

 private:
  std::string head_;
  std::size_t total_;
  bool quiet_, terminal_;
  int last_decile_ = -1;
  std::chrono::steady_clock::time_point last_draw_{};
};

// "45s", "3m05s", "2h04m".
std::string format_duration(double seconds);

}  // namespace cnn::detail
