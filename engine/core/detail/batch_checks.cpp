#include "engine/core/detail/batch_checks.hpp"

#include <cmath>
#include <cstdint>
#include <string>

#include "base/detail/finite.hpp"
#include "base/error.hpp"

namespace cnn {

void check_batch_inputs(const Batch& batch, const Shape& input, const char* call) {
  if (const Shape sample{batch.channels, batch.height, batch.width}; batch.channels > 0 && !(sample == input))
    throw ShapeError(std::string(call) + ": the batch's samples are " + sample.str() + ", and the network takes " +
                     input.str() + " (a network built for other data)");
  if (batch.size <= 0 || batch.on_device) return;
  const std::size_t sample = input.elements();
  if (!batch.images || (!batch.labels && !batch.targets))
    throw ConfigError(std::string(call) + ": a batch of " + std::to_string(batch.size) + " samples without " +
                      (batch.images ? "labels" : "images"));
  const std::size_t n = sample * static_cast<std::size_t>(batch.size);
  const std::size_t at = first_non_finite(batch.images, n);
  if (at < n)
    throw DataError(std::string(call) + ": sample " + std::to_string(at / sample) + " of the batch holds " +
                    (std::isnan(batch.images[at]) ? "a NaN" : "an infinity") + " (value " +
                    std::to_string(at % sample) + "); nothing was trained on it");
}

void check_batch_labels(const Batch& batch, int classes) {
  if (batch.on_device) return;
  for (int i = 0; i < batch.size; ++i)
    if (batch.labels[i] < 0 || batch.labels[i] >= classes)
      throw DataError("label " + std::to_string(batch.labels[i]) + " of sample " + std::to_string(i) +
                      " is outside the " + std::to_string(classes) + " classes of the network");
}

void check_batch_targets(const Batch& batch, const Network& net) {
  if (batch.on_device || batch.size <= 0) return;
  const Task task = net.task();
  if (task == Task::classify) {
    if (!batch.labels) throw ConfigError("a batch of " + std::to_string(batch.size) + " samples without labels");
    check_batch_labels(batch, net.num_classes());
    return;
  }
  if (!batch.targets)
    throw ConfigError("a batch of " + std::to_string(batch.size) + " samples without targets, for a network that " +
                      to_string(task) + "s");
  const std::size_t per_sample = net.target_bytes();
  if (batch.target_bytes > 0 && batch.target_bytes != per_sample)
    throw ShapeError("a batch whose targets are " + std::to_string(batch.target_bytes) + " bytes a sample, for a " +
                     "network that " + to_string(task) + "s with " + std::to_string(per_sample) + " (" +
                     (task == Task::segment ? "a mask of its input's size"
                                            : std::to_string(net.num_classes()) + " outputs") +
                     ")");
  if (task == Task::segment) {
    const auto* mask = static_cast<const std::uint8_t*>(batch.targets);
    const auto classes = static_cast<unsigned>(net.num_classes());
    for (std::size_t i = 0; i < per_sample * static_cast<std::size_t>(batch.size); ++i)
      if (mask[i] >= classes && mask[i] != kIgnoreMask)
        throw DataError("mask value " + std::to_string(mask[i]) + " at pixel " + std::to_string(i % per_sample) +
                        " of sample " + std::to_string(i / per_sample) + " is neither one of the " +
                        std::to_string(classes) + " classes of the network nor " + std::to_string(kIgnoreMask) +
                        " (ignored)");
    return;
  }
  const auto* values = static_cast<const float*>(batch.targets);
  const std::size_t count = per_sample / sizeof(float);
  for (std::size_t i = 0; i < count * static_cast<std::size_t>(batch.size); ++i) {
    const float v = values[i];
    const bool fine = task == Task::multilabel ? (v >= 0.0f && v <= 1.0f) : std::isfinite(v);
    if (!fine)
      throw DataError("target " + std::to_string(i % count) + " of sample " + std::to_string(i / count) + " is " +
                      std::to_string(v) + (task == Task::multilabel ? ": a multi-label target is between 0 and 1" : ": not a finite number"));
  }
}

}  // namespace cnn
