#include "engine/core/detail/batch_checks.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "base/detail/finite.hpp"
#include <cnnengine/base/error.hpp>

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
    throw ConfigError("a batch of " + std::to_string(batch.size) +
                      " samples without targets, for a network whose task is " + to_string(task));
  const std::size_t per_sample = net.target_bytes();
  if (batch.target_bytes > 0 && batch.target_bytes != per_sample)
    throw ShapeError("a batch whose targets are " + std::to_string(batch.target_bytes) + " bytes a sample, for a " +
                     "network whose task is " + to_string(task) + ", which takes " + std::to_string(per_sample) + " (" +
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

void check_step_batch(const Batch& batch, const StepBatchContract& contract, const Network& net, const char* call) {
  // Named only on a refusal: a step builds no string.
  auto refuse = [call](const std::string& why) { throw ConfigError(std::string(call) + ": " + why); };
  const int rank = contract.rank, ranks = contract.ranks;
  if (contract.data_parallel) {
    const RankShare mine = share_of_batch(std::max(batch.global_size, 0), rank, ranks);
    if (batch.global_size <= 0 || batch.first != mine.first || batch.size != mine.size)
      refuse("samples " + std::to_string(batch.first) + " to " + std::to_string(batch.first + batch.size) +
             " are not a share of a batch of " + std::to_string(batch.global_size) + " for rank " +
             std::to_string(rank) + " of " + std::to_string(ranks) + " (its share: samples " +
             std::to_string(mine.first) + " to " + std::to_string(mine.first + mine.size) +
             "; a data-parallel rank gives Batch::first and global_size, as a loader with the communicator's "
             "rank and ranks does: LoaderOptions::rank, ranks)");
  } else if (batch.global_size != 0 && (batch.first != 0 || batch.global_size != batch.size)) {
    refuse("a share of a batch (Batch::first, global_size) without a communicator: a loader over several ranks "
           "(LoaderOptions::ranks) for a trainer of one (TrainerOptions::communicator)");
  } else if (batch.size <= 0) {
    refuse("empty batch");
  }
  // The whole batch's size, the same on every rank, so every rank refuses alike: none is left in a sum.
  const int whole = batch.whole_size();
  const int planned = contract.batch;
  if (whole > planned || (whole < planned && !batch.last_of_epoch))
    refuse("a batch of " + std::to_string(whole) + " for a trainer planned for batches of " +
           std::to_string(planned) + " (TrainerOptions::batch): " +
           (whole > planned ? std::string("a step takes no more than the trainer's batch")
                            : std::string("only an epoch's last batch (Batch::last_of_epoch) may be smaller")) +
           "; cut the loader's batches at the trainer's (LoaderOptions::batch = " + std::to_string(planned) + ")");
  if (contract.data_parallel) {
    if (contract.even_shares && (batch.global_size % ranks != 0 || batch.size != batch.global_size / ranks))
      refuse("synchronised BatchNorm needs every batch shared evenly over the " + std::to_string(ranks) +
             " ranks; this one holds " + std::to_string(batch.global_size) +
             " samples (leave out an uneven last batch: LoaderOptions::drop_last)");
    if (batch.size == 0) {  // this rank sits the step out, but sums with the others
      // What its samples would be is checked still, so that every rank refuses data of another
      // shape alike and none waits in a sum for the others.
      check_batch_inputs(batch, net.input_shape(), call);
      return;
    }
  }
  // A batch no larger than the trainer's always splits into micro-batches of the network's need
  // (the planner's smallest micro-batch is 2 x need - 1, or the batch itself), unless it is below
  // the need: an epoch's last batch of one sample under BatchNorm.
  if (batch.size < contract.need_samples)
    refuse("a batch of " + std::to_string(batch.size) + " cannot train this network: " + std::string(contract.need_why));
  check_batch_inputs(batch, net.input_shape(), call);
  check_batch_targets(batch, net);
}

void check_micro_batch(int n, int planned) {
  if (n <= 0 || n > planned)
    throw ConfigError("micro-batch of " + std::to_string(n) + " samples for a plan of " + std::to_string(planned));
}

}  // namespace cnn
