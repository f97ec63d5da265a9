#include "engine/train/detail/recovery.hpp"

#include <algorithm>

namespace cnn {

Recovery::Recovery(int target, int smallest, int regrow_after)
    : target_(target), smallest_(smallest), regrow_after_(regrow_after) {}

int Recovery::after_failure(int micro_batch) {
  if (micro_batch <= smallest_) return 0;
  good_steps_ = 0;
  return std::max(smallest_, micro_batch / 2);
}

bool Recovery::regrow_due() {
  if (regrow_after_ <= 0 || good_steps_ < regrow_after_) return false;
  good_steps_ = 0;
  return true;
}

int Recovery::regrow(int micro_batch) {
  if (micro_batch >= target_ || !regrow_due()) return 0;
  return std::min(target_, 2 * micro_batch);
}

}  // namespace cnn
