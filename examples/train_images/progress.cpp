#include "progress.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

namespace cnn::app {
namespace {

// The terminal's width in characters (80 where it cannot tell).
int terminal_columns() {
  winsize size{};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return 80;
}

}  // namespace

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
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double eta = done ? elapsed * static_cast<double>(total_ - done) / static_cast<double>(done) : 0.0;
  // The fields, the least needed last: a narrow terminal keeps those that fit beside the bar.
  char head[48], fields[4][40];
  std::snprintf(head, sizeof head, "epoch %d/%d", epoch_, epochs_);
  std::snprintf(fields[0], sizeof fields[0], " %3.0f%%  eta %4.0fs", fraction * 100.0, eta);
  std::snprintf(fields[1], sizeof fields[1], "  loss %.4f", loss);
  std::snprintf(fields[2], sizeof fields[2], "  %7.0f img/s  acc %.3f", images_per_second, accuracy);
  std::snprintf(fields[3], sizeof fields[3], "  mem %s", memory.c_str());
  const int columns = terminal_ ? terminal_columns() : 120;
  std::string tail;
  int bar_width = 24;
  for (const char* field : fields) {
    const int rest = static_cast<int>(std::string(head).size() + tail.size() + std::string(field).size()) + 4;
    if (rest + 10 > columns) break;  // a bar of at least 10 stays
    tail += field;
  }
  bar_width = std::clamp(columns - static_cast<int>(std::string(head).size() + tail.size()) - 5, 0, bar_width);
  std::string bar(static_cast<std::size_t>(fraction * bar_width), '#');
  bar.resize(static_cast<std::size_t>(bar_width), '.');
  std::fprintf(stderr, "%s%s%s%s%s%s%s", terminal_ ? "\r" : "", head, bar_width > 0 ? " [" : "", bar.c_str(),
               bar_width > 0 ? "]" : "", tail.c_str(), terminal_ ? "\x1b[K" : "\n");  // clear what a longer line left
  std::fflush(stderr);
}

void Progress::finish() {
  if (!quiet_ && terminal_) std::fprintf(stderr, "\n");
}

}  // namespace cnn::app
