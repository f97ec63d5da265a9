#include "engine/plan/micro_batch_recovery.hpp"

#include <algorithm>

namespace cnn {

MicroBatchRecovery::MicroBatchRecovery(MicroBatchMemory& memory, int target, int smallest, int regrow_after,
                                       const std::function<void(const std::string&)>* log)
    : memory_(memory), target_(target), smallest_(smallest), regrow_after_(regrow_after), log_(log),
      micro_batch_(target) {}

void MicroBatchRecovery::report(const std::string& message) const {
  if (log_ && *log_) (*log_)(message);
}

int MicroBatchRecovery::build_fitting(int micro_batch) {
  for (;;) {
    try {
      memory_.build(micro_batch);
      break;
    } catch (const memory::OutOfMemory& error) {
      if (memory_.recompute_more()) break;
      if (micro_batch <= smallest_)
        throw memory::OutOfMemory(memory_.cannot_reserve(micro_batch) + ": " + error.what() + "\n" +
                                      memory_.byte_table(micro_batch),
                                  error.details());
      micro_batch = std::max(smallest_, micro_batch / 2);
    }
  }
  micro_batch_ = micro_batch;
  return micro_batch;
}

void MicroBatchRecovery::shrink_after(const memory::OutOfMemory& error, const std::string& where) {
  const int b = micro_batch_;
  if (memory_.recompute_more()) {
    good_steps_ = 0;
    report(where + ": out of memory at micro-batch " + std::to_string(b) + " (" + error.what() +
           "); replaying it at micro-batch " + std::to_string(b) + " recomputing " +
           std::to_string(memory_.recomputed_layers()) + " layers");
    return;
  }
  if (b <= smallest_) {  // nothing left to halve
    memory_.release();
    throw memory::OutOfMemory(where + ": out of memory at micro-batch " + std::to_string(b) +
                                  ", the smallest planned for this network: " + error.what() + "\n" +
                                  memory_.byte_table(b),
                              error.details());
  }
  good_steps_ = 0;
  build_fitting(std::max(smallest_, b / 2));
  report(where + ": out of memory at micro-batch " + std::to_string(b) + " (" + error.what() +
         "); replaying it at micro-batch " + std::to_string(micro_batch_));
}

bool MicroBatchRecovery::regrow_due() {
  if (regrow_after_ <= 0 || good_steps_ < regrow_after_) return false;
  good_steps_ = 0;
  return true;
}

void MicroBatchRecovery::maybe_regrow(long next_step) {
  const int b = micro_batch_;
  if (memory_.recomputing_more()) {  // first back to the recomputation the budget alone asks for
    if (!regrow_due()) return;
    build_fitting(b);
    if (!memory_.recomputing_more())
      report("step " + std::to_string(next_step) + ": micro-batch " + std::to_string(micro_batch_) + " back to " +
             std::to_string(memory_.recomputed_layers()) + " recomputed layers");
    return;
  }
  if (b >= target_ || !regrow_due()) return;
  build_fitting(std::min(target_, 2 * b));
  if (micro_batch_ > b)
    report("step " + std::to_string(next_step) + ": micro-batch back up from " + std::to_string(b) + " to " +
           std::to_string(micro_batch_));
}

}  // namespace cnn
