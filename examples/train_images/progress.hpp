#pragma once
// One status line: a bar, ETA, images/s, loss and memory. Redrawn in place on a terminal,
// printed every tenth of the epoch otherwise (logs stay short).
#include <chrono>
#include <cstddef>
#include <string>

namespace cnn::app {

class Progress {
 public:
  Progress(int epoch, int epochs, std::size_t total_batches, bool quiet);
  void update(std::size_t batches_done, double images_per_second, double loss, double accuracy,
              const std::string& memory);
  void finish();

 private:
  int epoch_, epochs_;
  std::size_t total_;
  bool quiet_, terminal_;
  int last_decile_ = -1;
  std::chrono::steady_clock::time_point start_, last_draw_{};
};

}  // namespace cnn::app
