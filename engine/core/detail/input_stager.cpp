#include "engine/core/detail/input_stager.hpp"

#include <cstring>
#include <string>

#include "base/error.hpp"
#include "memory/memory_resource.hpp"

namespace cnn {

InputStager::Layout InputStager::layout(std::size_t sample_floats, int samples) {
  const auto n = static_cast<std::size_t>(samples);
  Layout l;
  l.labels = n * sample_floats * sizeof(float);
  l.scalars = memory::align_up(l.labels + n * sizeof(std::int32_t), alignof(StepScalars));
  l.bytes = l.scalars + sizeof(StepScalars);
  return l;
}

namespace {

// The packed input, then the two sums.
std::size_t pinned_bytes(std::size_t packed) { return memory::align_up(packed, alignof(float)) + 2 * sizeof(float); }

}  // namespace

std::size_t InputStager::bytes_for(const Backend& backend, std::size_t sample_floats, int micro_batch) {
  if (!backend.copies_overlap_compute()) return 0;
  const std::size_t packed = layout(sample_floats, micro_batch).bytes;
  return memory::align_up(pinned_bytes(packed), memory::kDefaultAlignment) +
         memory::align_up(packed, memory::kDefaultAlignment);
}

InputStager::InputStager(Backend& backend, memory::MemoryStack& stack, std::size_t sample_floats, int micro_batch)
    : backend_(backend), sample_floats_(sample_floats), micro_batch_(micro_batch),
      overlapped_(backend.copies_overlap_compute() && stack.has_staging()) {
  if (micro_batch < 1) throw ConfigError("an input stager for micro-batches of " + std::to_string(micro_batch));
  if (!overlapped_) return;
  const std::size_t bytes = layout(sample_floats, micro_batch).bytes;
  sums_at_ = memory::align_up(bytes, alignof(float));
  pinned_ = memory::Buffer(stack.staging(), pinned_bytes(bytes), memory::Category::data_staging);
  slot_ = memory::Buffer(stack.blocks(), bytes, memory::Category::data_staging);
}

void InputStager::stage(const Batch& batch, const StepScalars& scalars, float* images, std::int32_t* labels,
                        StepScalars* scalars_slot) {
  if (batch.size < 1 || batch.size > micro_batch_)
    throw ConfigError("a micro-batch of " + std::to_string(batch.size) + " samples for an input stager of " +
                      std::to_string(micro_batch_));
  const Layout l = layout(sample_floats_, batch.size);
  const std::size_t label_bytes = static_cast<std::size_t>(batch.size) * sizeof(std::int32_t);
  if (!overlapped_) {
    if (batch.on_device) {
      backend_.copy_on_device(batch.images, images, l.labels);
      backend_.copy_on_device(batch.labels, labels, label_bytes);
    } else {
      backend_.copy_to_device(batch.images, images, l.labels);
      backend_.copy_to_device(batch.labels, labels, label_bytes);
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
    backend_.copy_on_device(batch.images, images, l.labels);
    backend_.copy_on_device(batch.labels, labels, label_bytes);
  } else {
    std::memcpy(pinned, batch.images, l.labels);
    std::memcpy(pinned + l.labels, batch.labels, label_bytes);
    pinned_free_ = backend_.copy_to_device_async(pinned, slot_.data(), l.bytes);
    backend_.copy_on_device(slot, images, l.labels);
    backend_.copy_on_device(slot + l.labels, labels, label_bytes);
  }
  backend_.copy_on_device(slot + l.scalars, scalars_slot, sizeof scalars);
}

}  // namespace cnn
