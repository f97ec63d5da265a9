#include "fit/detail/progress_bar.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace cnn::detail {
namespace {

// The terminal's width in characters (80 where it cannot tell).
int terminal_columns() {
  winsize size{};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return 80;
}

}  // namespace

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<long long>(std::llround(seconds));
  char text[32];
  if (s < 60)
    std::snprintf(text, sizeof text, "%llds", s);
  else if (s < 3600)
    std::snprintf(text, sizeof text, "%lldm%02llds", s / 60, s % 60);
  else
    std::snprintf(text, sizeof text, "%lldh%02lldm", s / 3600, s / 60 % 60);
  return text;
}

ProgressBar::ProgressBar(std::string head, std::size_t total, bool quiet, bool terminal_only)
    : head_(std::move(head)), total_(total ? total : 1), quiet_(quiet), terminal_(isatty(fileno(stderr)) != 0) {
  if (terminal_only && !terminal_) quiet_ = true;
}

void ProgressBar::update(std::size_t done, double eta_seconds, const std::vector<std::string>& fields) {
  if (quiet_) return;
  const double fraction = std::min(1.0, static_cast<double>(done) / static_cast<double>(total_));
  const auto now = std::chrono::steady_clock::now();
  const int decile = static_cast<int>(fraction * 10);
  if (terminal_) {
    if (done != total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  } else if (decile == last_decile_ && done != total_) {
    return;
  }
  last_draw_ = now;
  last_decile_ = decile;
  char share[48];
  if (eta_seconds >= 0)
    std::snprintf(share, sizeof share, " %3.0f%%  eta %s", fraction * 100.0, format_duration(eta_seconds).c_str());
  else
    std::snprintf(share, sizeof share, " %3.0f%%", fraction * 100.0);
  const int columns = terminal_ ? terminal_columns() : 120;
  std::string tail = share;
  for (const std::string& field : fields) {
    const int rest = static_cast<int>(head_.size() + tail.size() + field.size() + 2) + 4;
    if (rest + 10 > columns) break;  // a bar of at least 10 stays
    tail += "  " + field;
  }
  const int bar_width = std::clamp(columns - static_cast<int>(head_.size() + tail.size()) - 5, 0, 24);
  std::string bar(static_cast<std::size_t>(fraction * bar_width), '#');
  bar.resize(static_cast<std::size_t>(bar_width), '.');
  std::fprintf(stderr, "%s%s%s%s%s%s%s", terminal_ ? "\r" : "", head_.c_str(), bar_width > 0 ? " [" : "",
               bar.c_str(), bar_width > 0 ? "]" : "", tail.c_str(),
               terminal_ ? "\x1b[K" : "\n");  // clear what a longer line left
  std::fflush(stderr);
}

void ProgressBar::finish() {
  if (!quiet_ && terminal_) std::fprintf(stderr, "\n");
}

}  // namespace cnn::detail
