#include "backends/cuda/detail/copy_tracker.hpp"

#include "backends/cuda/detail/check.hpp"

namespace cnn::cuda {
namespace {

cudaEvent_t make_event() {
  cudaEvent_t event = nullptr;
  CNN_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  return event;
}

}  // namespace

void CopyTracker::release() noexcept {
  for (Slot& slot : slots_) {
    if (slot.last_touch) cudaEventDestroy(slot.last_touch);
    slot = Slot{};
  }
  if (everything_) cudaEventDestroy(everything_);
  everything_ = nullptr;
}

void CopyTracker::touched(cudaStream_t compute, const DeviceRange* ranges, std::size_t count) {
  for (Slot& slot : slots_) {
    if (slot.begin == slot.end) continue;
    for (std::size_t i = 0; i < count; ++i) {
      auto begin = reinterpret_cast<std::uintptr_t>(ranges[i].data);
      if (!ranges[i].data || begin >= slot.end || begin + ranges[i].bytes <= slot.begin) continue;
      CNN_CHECK(cudaEventRecord(slot.last_touch, compute));
      break;
    }
  }
}

void CopyTracker::order_copy(const void* dst, std::size_t bytes, cudaStream_t compute,
                             cudaStream_t copy) {
  auto begin = reinterpret_cast<std::uintptr_t>(dst);
  auto end = begin + bytes;
  ++copies_;
  for (Slot& slot : slots_) {
    if (slot.begin == slot.end || begin < slot.begin || end > slot.end) continue;
    // An event never recorded counts as complete: nothing touched the range since it was known.
    CNN_CHECK(cudaStreamWaitEvent(copy, slot.last_touch, 0));
    slot.last_copy = copies_;
    return;
  }

  if (!everything_) everything_ = make_event();
  CNN_CHECK(cudaEventRecord(everything_, compute));
  CNN_CHECK(cudaStreamWaitEvent(copy, everything_, 0));

  Slot* victim = &slots_[0];
  for (Slot& slot : slots_) {
    if (slot.begin == slot.end) {
      victim = &slot;
      break;
    }
    if (slot.last_copy < victim->last_copy) victim = &slot;
  }
  // A fresh event: the old one may carry a record of work on the evicted range. Made first, so
  // that a failure leaves the slot as it was.
  cudaEvent_t fresh = make_event();
  if (victim->last_touch) cudaEventDestroy(victim->last_touch);
  victim->last_touch = fresh;
  victim->begin = begin;
  victim->end = end;
  victim->last_copy = copies_;
}

}  // namespace cnn::cuda

