#include "stop_signal.hpp"

#include <csignal>

namespace cnn::app {
namespace {

volatile std::sig_atomic_t requested = 0;
volatile std::sig_atomic_t at_step_boundaries = 0;

extern "C" void on_stop(int signal) {
  if (requested || !at_step_boundaries) {  // nothing to wait for: the signal's own action
    std::signal(signal, SIG_DFL);
    std::raise(signal);
    return;
  }
  requested = signal;
}

}  // namespace

void install_stop_handlers() {
  std::signal(SIGINT, on_stop);
  std::signal(SIGTERM, on_stop);
}

int stop_requested() { return requested; }

StepBoundaryStop::StepBoundaryStop() { at_step_boundaries = 1; }

StepBoundaryStop::~StepBoundaryStop() { at_step_boundaries = 0; }

}  // namespace cnn::app
