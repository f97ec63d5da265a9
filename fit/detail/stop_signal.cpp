#include "fit/detail/stop_signal.hpp"

#include <csignal>

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

}  // namespace

int stop_requested() { return requested; }

StopOnSignal::StopOnSignal() {
  requested = 0;
  previous_interrupt_ = std::signal(SIGINT, on_stop);
  previous_terminate_ = std::signal(SIGTERM, on_stop);
  // A signal the process ignores (nohup, a background job's SIGINT) stays ignored.
  if (previous_interrupt_ == SIG_IGN) std::signal(SIGINT, SIG_IGN);
  if (previous_terminate_ == SIG_IGN) std::signal(SIGTERM, SIG_IGN);
}

StopOnSignal::~StopOnSignal() {
  std::signal(SIGINT, previous_interrupt_ == SIG_ERR ? SIG_DFL : previous_interrupt_);
  std::signal(SIGTERM, previous_terminate_ == SIG_ERR ? SIG_DFL : previous_terminate_);
}

}  // namespace cnn::detail
