#include "progress.hpp"

#include <unistd.h>

#include <cstdio>

namespace cnn::app {

Progress::Progress(int epoch, int epochs, std::size_t total_batches, bool quiet)
    : epoch_(epoch), epochs_(epochs), total_(total_batches ? total_batches : 1), quiet_(quiet),
      terminal_(isatty(fileno(stderr)) != 0), start_(std::chrono::steady_clock::now()) {}

void Progress::update(std::size_t done, double images_per_second, double loss, double accuracy,
                      const std::string& memory) {
  if (quiet_) return;
  const double fraction = static_cast<double>(done) / static_cast<double>(total_);
  const auto now = std::chrono::steady_clock::now();
  const int decile = static_cast<int>(fraction * 10);
  if (terminal_) {
    if (done != total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  } else if (decile == last_decile_ && done != total_) {
    return;
  }
  last_draw_ = now;
  last_decile_ = decile;
  constexpr int kWidth = 24;
  const int filled = static_cast<int>(fraction * kWidth);
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(kWidth, '.');
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double eta = done ? elapsed * static_cast<double>(total_ - done) / static_cast<double>(done) : 0.0;
  std::fprintf(stderr, "%sepoch %d/%d [%s] %3.0f%%  eta %4.0fs  %7.0f img/s  loss %.4f  acc %.3f  mem %s%s",
               terminal_ ? "\r" : "", epoch_, epochs_, bar.c_str(), fraction * 100.0, eta, images_per_second, loss,
               accuracy, memory.c_str(), terminal_ ? "   " : "\n");
  std::fflush(stderr);
}

void Progress::finish() {
  if (!quiet_ && terminal_) std::fprintf(stderr, "\n");
}

}  // namespace cnn::app
