#pragma once
// SIGINT and SIGTERM during a run (Fit::run with stop_on_signal): while a StopOnSignal lives, the
// first asks the run to stop at the next step boundary, where it saves what it was asked to save;
// a second ends the process at once, as the signal's own action would. When it ends, the handlers
// the process had come back (the default ones: the signal ends the process at once). A signal the
// process ignores stays ignored. Runs that overlap on several threads share the handlers: the
// first installs them, the last gives the process's back (Note [Overlapping runs]).
namespace cnn::detail {

// 0 while no stop was asked, else the signal's number.
int stop_requested();

class StopOnSignal {
 public:
  StopOnSignal();
  ~StopOnSignal();
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;
};

}  // namespace cnn::detail
