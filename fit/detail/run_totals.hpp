#pragma once
// What a run's summaries (the progress's last lines, the metrics file's summary line) say of one
// run(): tallied from its events, and the figures both compute from its epochs.
#include <cstddef>
#include <vector>

#include <cnnengine/engine/train/trainer.hpp>
#include <cnnengine/models/checkpoint.hpp>

namespace cnn::detail {

class RunTotals {
 public:
  void begin(Trainer& trainer);  // on_run_begin
  void add(const StepReport& step);

  std::size_t reserved_at_start() const { return reserved_at_start_; }
  long host_waits() const { return host_waits_; }
  // The seconds a step waited for the other ranks, on average over this run()'s steps.
  double communication_seconds_per_step(const Trainer& trainer) const;

 private:
  std::size_t reserved_at_start_ = 0;
  long steps_at_start_ = 0;
  double communication_seconds_ = 0;
  long host_waits_ = 0;
};

// The training images a second over the epochs (each epoch's rate weighted by its time).
double images_per_second(const std::vector<EpochRecord>& epochs);
// The last finished epoch; 0 before any.
int finished_epochs(const std::vector<EpochRecord>& epochs);
// The most resident memory the process has held (ru_maxrss: Linux's VmHWM), in bytes; 0 where it
// cannot say.
std::size_t peak_resident_bytes();

}  // namespace cnn::detail
