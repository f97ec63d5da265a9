#pragma once
// The run's TensorBoard event files (FitOptions::tensorboard): every step's loss, accuracy,
// learning rate, images/s and memory reserved, each epoch's metrics, and the test set's at the
// end. A callback over the run's events (FitCallbacks), on the rank that writes.
#include <filesystem>
#include <optional>

#include "fit/detail/event_file.hpp"
#include <cnnengine/fit/fit.hpp>

namespace cnn::detail {

class TensorBoardLog {
 public:
  // A new event file in `folder`; a resumed run's opens with a session start at `resumed_step`,
  // the step after its checkpoint (TensorBoard drops what a killed run logged from there on).
  TensorBoardLog(const std::filesystem::path& folder, std::optional<long> resumed_step);
  TensorBoardLog(const TensorBoardLog&) = delete;
  TensorBoardLog& operator=(const TensorBoardLog&) = delete;

  // Its events, bound to this log: it must outlive the run.
  FitCallbacks callbacks();

 private:
  void step(const StepReport& r, FitControl& control);
  void epoch_end(const EpochRecord& e, FitControl& control);
  void run_end(const FitResult& result, FitControl& control);

  EventFile events_;
};

}  // namespace cnn::detail
