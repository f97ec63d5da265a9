// The run's signal handlers (fit/detail/stop_signal.hpp) when runs overlap on several threads.
#include <catch2/catch.hpp>

#include <csignal>
#include <optional>

#include "fit/detail/stop_signal.hpp"

namespace {

extern "C" void own_handler(int) {}

using Handler = void (*)(int);

Handler current(int signal) {
  const Handler handler = std::signal(signal, SIG_DFL);
  std::signal(signal, handler);
  return handler;
}

}  // namespace

TEST_CASE("runs that overlap out of order give the process its own handlers back", "[fit]") {
  const Handler before_interrupt = std::signal(SIGINT, own_handler);
  const Handler before_terminate = std::signal(SIGTERM, own_handler);
  {
    std::optional<cnn::detail::StopOnSignal> a, b;
    a.emplace();
    const Handler run_handler = current(SIGINT);
    CHECK(run_handler != own_handler);
    b.emplace();
    CHECK(current(SIGINT) == run_handler);
    std::raise(SIGINT);  // asked while both run: both see it
    CHECK(cnn::detail::stop_requested() == SIGINT);
    a.reset();  // A ends first: B still runs under the run's handler
    CHECK(current(SIGINT) == run_handler);
    CHECK(cnn::detail::stop_requested() == SIGINT);
    b.reset();
  }
  CHECK(current(SIGINT) == own_handler);
  CHECK(current(SIGTERM) == own_handler);
  {
    const cnn::detail::StopOnSignal fresh;  // a new run starts with no stop asked
    CHECK(cnn::detail::stop_requested() == 0);
  }
  std::signal(SIGINT, before_interrupt);
  std::signal(SIGTERM, before_terminate);
}
