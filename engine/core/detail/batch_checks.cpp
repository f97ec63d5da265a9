#include "engine/core/detail/batch_checks.hpp"

#include <cmath>
#include <string>

#include "base/detail/finite.hpp"
#include "base/error.hpp"

namespace cnn {

void check_batch_inputs(const Batch& batch, std::size_t sample, const char* call) {
  if (batch.size <= 0 || batch.on_device) return;
  if (!batch.images || !batch.labels)
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

}  // namespace cnn
