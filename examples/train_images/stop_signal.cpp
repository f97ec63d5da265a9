#include "stop_signal.hpp"

#include <csignal>

namespace cnn::app {
namespace {

volatile std::sig_atomic_t requested = 0;

extern "C" void on_stop(int signal) {
  if (requested) {  // the second: no more waiting for a step boundary
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

}  // namespace cnn::app
