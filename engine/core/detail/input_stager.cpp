#include "engine/core/detail/input_stager.hpp"

#include <cstring>
#include <string>

#include <cnnengine/base/error.hpp>
#include "engine/core/detail/batch_checks.hpp"
#include <cnnengine/memory/memory_resource.hpp>

namespace cnn {

InputStager::Layout InputStager::layout(std::size_t sample_floats, std::size_t target_bytes, int samples) {
  const auto n = static_cast<std::size_t>(samples);
  Layout l;
  l.targets = n * sample_floats * sizeof(float);
  l.scalars = memory::align_up(l.targets + n * target_bytes, alignof(StepScalars));
  l.bytes = l.scalars + sizeof(StepScalars);
  return l;
}

namespace {

// The packed input, then the loss's sums.
std::size_t pinned_bytes(std::size_t packed) {
  return memory::align_up(packed, alignof(float)) + kLossSumFloats * sizeof(float);
}

}  // namespace

std::size_t InputStager::bytes_for(const Backend& backend, std::size_t sample_floats, std::size_t target_bytes,
                                   int micro_batch) {
  if (!backend.copies_overlap_compute()) return 0;
  const std::size_t packed = layout(sample_floats, target_bytes, micro_batch).bytes;
  return memory::align_up(pinned_bytes(packed), memory::kDefaultAlignment) +
         memory::align_up(packed, memory::kDefaultAlignment);
}

InputStager::InputStager(Backend& backend, memory::MemoryStack& stack, std::size_t sample_floats,
                         std::size_t target_bytes, int micro_batch)
    : backend_(backend), sample_floats_(sample_floats), target_bytes_(target_bytes), micro_batch_(micro_batch),
      overlapped_(backend.copies_overlap_compute() && stack.has_staging()) {
  if (micro_batch < 1) throw ConfigError("an input stager for micro-batches of " + std::to_string(micro_batch));
  if (!overlapped_) return;
  const std::size_t bytes = layout(sample_floats, target_bytes, micro_batch).bytes;
  sums_at_ = memory::align_up(bytes, alignof(float));
  pinned_ = memory::Buffer(stack.staging(), pinned_bytes(bytes), memory::Category::data_staging);
  slot_ = memory::Buffer(stack.blocks(), bytes, memory::Category::data_staging);
}

void InputStager::stage(const Batch& batch, const StepScalars& scalars, float* images, void* targets,
                        StepScalars* scalars_slot) {
  check_micro_batch(batch.size, micro_batch_);
  const Layout l = layout(sample_floats_, target_bytes_, batch.size);
  const std::size_t batch_target_bytes = static_cast<std::size_t>(batch.size) * target_bytes_;
  const void* batch_targets = batch.labels ? static_cast<const void*>(batch.labels) : batch.targets;
  if (!overlapped_) {
    if (batch.on_device) {
      backend_.copy_on_device(batch.images, images, l.targets);
      backend_.copy_on_device(batch_targets, targets, batch_target_bytes);
    } else {
      backend_.copy_to_device(batch.images, images, l.targets);
      backend_.copy_to_device(batch_targets, targets, batch_target_bytes);
    }
    backend_.copy_to_device(&scalars, scalars_slot, sizeof scalars);
    return;
  }
  if (!backend_.reached(pinned_free_)) {
    backend_.wait(pinned_free_);
    ++host_waits_;
  }
  auto* pinned = static_cast<char*>(pinned_.data());
  auto* slot = static_cast<char*>(slot_.data());
  std::memcpy(pinned + l.scalars, &scalars, sizeof scalars);
  if (batch.on_device) {  // only the scalars come from the host
    pinned_free_ = backend_.copy_to_device_async(pinned + l.scalars, slot + l.scalars, sizeof scalars);
    backend_.copy_on_device(batch.images, images, l.targets);
    backend_.copy_on_device(batch_targets, targets, batch_target_bytes);
  } else {
    std::memcpy(pinned, batch.images, l.targets);
    std::memcpy(pinned + l.targets, batch_targets, batch_target_bytes);
    pinned_free_ = backend_.copy_to_device_async(pinned, slot_.data(), l.bytes);
    backend_.copy_on_device(slot, images, l.targets);
    backend_.copy_on_device(slot + l.targets, targets, batch_target_bytes);
  }
  backend_.copy_on_device(slot + l.scalars, scalars_slot, sizeof scalars);
}

}  // namespace cnn
