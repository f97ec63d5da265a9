#pragma once
// SIGINT and SIGTERM. Inside the training loop (while a StepBoundaryStop lives) the first asks the
// run to stop at the next step boundary, where it saves what it was asked to save and exits 128 +
// the signal (130, 143); a second ends the process at once. Anywhere else (reading the data,
// planning, exporting) there is nothing to save, and the first signal ends the process at once,
// with the same exit status.
namespace cnn::app {

void install_stop_handlers();
// 0 while no stop was asked, else the signal's number.
int stop_requested();

// While one lives, a first signal waits for the loop's next step boundary.
class StepBoundaryStop {
 public:
  StepBoundaryStop();
  ~StepBoundaryStop();
  StepBoundaryStop(const StepBoundaryStop&) = delete;
  StepBoundaryStop& operator=(const StepBoundaryStop&) = delete;
};

}  // namespace cnn::app
