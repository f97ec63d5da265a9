#include "fit/detail/stop_signal.hpp"

#include <csignal>
#include <mutex>

namespace cnn::detail {
namespace {

volatile std::sig_atomic_t requested = 0;

extern "C" void on_stop(int signal) {
  if (requested) {  // a second: the signal's own action, at once
    std::signal(signal, SIG_DFL);
    std::raise(signal);
    return;
  }
  requested = signal;
}

// Note [Overlapping runs]: runs on several threads (a program's, or Python's) overlap in any order:
// A starts, B starts, A ends, B ends. The handlers are the process's, so the first run to start
// installs them (keeping what the process had) and the last to end gives those back; a stop asked
// while both run stops both. Each run keeping what it found would leave A's handler in place
// after B ends, and the process's own (Python's KeyboardInterrupt) lost for good.
std::mutex handlers_mutex;
int runs = 0;
void (*previous_interrupt)(int) = nullptr;
void (*previous_terminate)(int) = nullptr;

}  // namespace

int stop_requested() { return requested; }

StopOnSignal::StopOnSignal() {
  const std::lock_guard<std::mutex> lock(handlers_mutex);
  if (runs++ > 0) return;
  requested = 0;
  previous_interrupt = std::signal(SIGINT, on_stop);
  previous_terminate = std::signal(SIGTERM, on_stop);
  // A signal the process ignores (nohup, a background job's SIGINT) stays ignored.
  if (previous_interrupt == SIG_IGN) std::signal(SIGINT, SIG_IGN);
  if (previous_terminate == SIG_IGN) std::signal(SIGTERM, SIG_IGN);
}

StopOnSignal::~StopOnSignal() {
  const std::lock_guard<std::mutex> lock(handlers_mutex);
  if (--runs > 0) return;
  std::signal(SIGINT, previous_interrupt == SIG_ERR ? SIG_DFL : previous_interrupt);
  std::signal(SIGTERM, previous_terminate == SIG_ERR ? SIG_DFL : previous_terminate);
}

}  // namespace cnn::detail
