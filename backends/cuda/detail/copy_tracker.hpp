#pragma once
// Lets copy_to_device overlap the compute stream without racing it. A copy into device memory
// must wait for earlier work that reads or writes that memory (the previous step may still read
// the input slot). Waiting for all earlier work would serialise loader and step; instead the
// tracker remembers the ranges copies went to, records an event whenever compute work touches
// one of them, and a copy into a known range waits for that event only. A copy into a range it
// does not know waits for all earlier compute work, then the range becomes known.
#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>

namespace cnn::cuda {

struct DeviceRange {
  const void* data = nullptr;
  std::size_t bytes = 0;
};

class CopyTracker {
 public:
  CopyTracker() = default;
  ~CopyTracker() { release(); }
  CopyTracker(const CopyTracker&) = delete;
  CopyTracker& operator=(const CopyTracker&) = delete;
  void release() noexcept;

  // Work touching `ranges` has just been enqueued on `compute`.
  void touched(cudaStream_t compute, const DeviceRange* ranges, std::size_t count);
  // Makes `copy` wait for the earlier work on `compute` that touched [dst, dst + bytes).
  void order_copy(const void* dst, std::size_t bytes, cudaStream_t compute, cudaStream_t copy);

 private:
  struct Slot {
    std::uintptr_t begin = 0, end = 0;  // empty when begin == end
    cudaEvent_t last_touch = nullptr;
    std::uint64_t last_copy = 0;  // for least-recently-used replacement
  };
  static constexpr std::size_t kSlots = 8;  // input and label slots, double-buffered, with room
  std::array<Slot, kSlots> slots_{};
  cudaEvent_t everything_ = nullptr;
  std::uint64_t copies_ = 0;
};

}  // namespace cnn::cuda
