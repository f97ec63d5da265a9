#include "fit/detail/run_totals.hpp"

#include <sys/resource.h>

namespace cnn::detail {

void RunTotals::begin(Trainer& trainer) {
  reserved_at_start_ = trainer.memory_stack().statistics().current_bytes;
  steps_at_start_ = trainer.steps();
  communication_seconds_ = 0;
  host_waits_ = 0;
}

void RunTotals::add(const StepReport& step) {
  communication_seconds_ += step.communication_seconds;
  host_waits_ += step.host_waits;
}

double RunTotals::communication_seconds_per_step(const Trainer& trainer) const {
  const double steps_run = static_cast<double>(trainer.steps() - steps_at_start_);
  return steps_run > 0 ? communication_seconds_ / steps_run : 0;
}

double images_per_second(const std::vector<EpochRecord>& epochs) {
  double seconds = 0, images = 0;
  for (const EpochRecord& e : epochs) {
    seconds += e.seconds;
    images += e.images_per_second * e.seconds;
  }
  return seconds > 0 ? images / seconds : 0;
}

int finished_epochs(const std::vector<EpochRecord>& epochs) { return epochs.empty() ? 0 : epochs.back().epoch; }

std::size_t peak_resident_bytes() {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  return static_cast<std::size_t>(u.ru_maxrss) * 1024;
}

}  // namespace cnn::detail
