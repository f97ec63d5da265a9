#pragma once
// How a micro-batch's images, targets (a classification's labels, a segmentation's masks, ...)
// and scalars reach its step.
//
// Where the backend's copies run beside its compute calls (CUDA): one packed copy per
// micro-batch. The host packs the images, the labels and the StepScalars into one pinned buffer
// and copies it, without waiting, to a device slot beside the step arena; the copy waits on the
// device only for the calls that last read that slot. The step's first calls then move the three
// parts to the plan's input and label slots and the scalars' fixed place (device to device). So
// micro-batch i+1 is copied while micro-batch i computes: the arena's input slot and this one
// are the two input slots, and the plan counts both (bytes_for). The host waits only when it is
// two micro-batches ahead of the device (the pinned buffer is still being copied from): that is
// back-pressure, and host_waits() counts it.
//
// Elsewhere (the CPU, or a memory stack without staging memory): a copy straight into each of the
// plan's slots, nothing to overlap, nothing more reserved.
#include <cstddef>
#include <cstdint>

#include <cnnengine/base/batch.hpp>
#include <cnnengine/engine/core/backend.hpp>
#include "engine/core/detail/loss_call.hpp"
#include "memory/buffer.hpp"
#include <cnnengine/memory/memory_stack.hpp>

namespace cnn {

class InputStager {
 public:
  // For micro-batches of at most `micro_batch` samples of `sample_floats` floats each, and a
  // target of `target_bytes` each (Network::target_bytes).
  InputStager(Backend& backend, memory::MemoryStack& stack, std::size_t sample_floats, std::size_t target_bytes,
              int micro_batch);
  InputStager(const InputStager&) = delete;
  InputStager& operator=(const InputStager&) = delete;

  // What an InputStager for these sizes reserves: the packed input pinned on the host (with the
  // step's sums after it) and on the device; 0 where the backend's copies do not overlap compute.
  static std::size_t bytes_for(const Backend& backend, std::size_t sample_floats, std::size_t target_bytes,
                               int micro_batch);

  // The micro-batch's images and targets (batch.labels, or batch.targets for the other tasks;
  // batch.size at most the micro-batch; host memory, or the backend's where batch.on_device)
  // into the plan's slots, `scalars` into `scalars_slot`; every later backend call sees them.
  void stage(const Batch& batch, const StepScalars& scalars, float* images, void* targets, StepScalars* scalars_slot);

  // kLossSumFloats floats of host memory a step's loss sums come back to (pinned where copies
  // overlap compute, so that the copy does not wait).
  float* host_sums() { return overlapped_ ? reinterpret_cast<float*>(static_cast<char*>(pinned_.data()) + sums_at_) : sums_; }

  bool overlapped() const { return overlapped_; }
  long host_waits() const { return host_waits_; }

 private:
  struct Layout {
    std::size_t targets = 0, scalars = 0, bytes = 0;  // offsets, and the packed size
  };
  static Layout layout(std::size_t sample_floats, std::size_t target_bytes, int samples);

  Backend& backend_;
  std::size_t sample_floats_;
  std::size_t target_bytes_;
  int micro_batch_;
  bool overlapped_;
  memory::Buffer pinned_, slot_;
  std::size_t sums_at_ = 0;  // the sums' place in pinned_, after the packed input
  float sums_[kLossSumFloats] = {};
  Fence pinned_free_;  // the last copy out of the pinned buffer
  long host_waits_ = 0;
};

}  // namespace cnn
