#pragma once
// A batch of samples: what the loader gives, what the trainer steps, evaluates and predicts on,
// and, inside the trainer, each micro-batch it cuts a step into. One type from the data set to
// the device, so that nothing is copied field by field on the way. It lives here, below both
// the loader (data/) and the engine, which do not know each other, with the rule that cuts a
// batch into the ranks' shares and the stream of batches an evaluation reads.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

namespace cnn {

struct Batch {
  const float* images = nullptr;  // size samples, each C x H x W floats (NCHW)
  const std::int32_t* labels = nullptr;  // classification: one class a sample (else null)
  int size = 0;
  // These `size` samples are samples first .. first + size - 1 of a batch of global_size: a
  // data-parallel rank's share of the whole batch (share_of_batch, below), or a
  // micro-batch's place in its step's batch. global_size 0: the batch is all there is (first 0).
  int first = 0;
  int global_size = 0;
  // The images and labels are in the backend's memory instead (a benchmark's batch, made once on
  // the device: benchmarks/train_throughput). They are copied device to device and not checked
  // (no pixel nor label is read on the host): the caller vouches for them. Training only.
  bool on_device = false;
  // Where the loader's batch sits in its epoch: its number, and whether it is the epoch's last,
  // the one batch a trainer takes smaller than its own (a data set that its batch does not
  // divide, without drop_last).
  std::size_t index = 0;
  bool last_of_epoch = false;
  // The other tasks' targets (base/task.hpp): cnn::target_bytes a sample, laid end to end, in
  // the same memory as the images; null for classification, whose labels are above.
  const void* targets = nullptr;
  // What each sample is, where the batch's maker knows it (a loader gives its data set's): its
  // image's channels, height and width, and its target's bytes (0 for a class label). A trainer
  // or a predictor refuses a batch whose samples its network does not take, before it reads one.
  // Left 0 (a batch made by hand): not known, the caller vouches for the sizes.
  int channels = 0, height = 0, width = 0;
  std::size_t target_bytes = 0;

  // The whole batch these samples belong to: global_size, or size where it is 0.
  int whole_size() const { return global_size > 0 ? global_size : size; }
};

// A rank's part of a batch in data-parallel training: the loader loads it, the trainer trains on
// it, and both must agree to the sample, so the rule lives here, below both.
struct RankShare {
  int first = 0;  // the share's first sample in the batch
  int size = 0;
};

// The share of `rank` (0 <= rank < ranks) in a batch of `batch` samples: the first `batch % ranks`
// ranks take one sample more, in rank order, so that the shares laid end to end are the batch.
inline RankShare share_of_batch(int batch, int rank, int ranks) {
  const int base = batch / ranks, extra = batch % ranks;
  return RankShare{rank * base + (rank < extra ? rank : extra), base + (rank < extra ? 1 : 0)};
}

// The batches of an evaluation, one a call, until nullopt (a loader's next()): what a trainer
// and a predictor both evaluate.
using NextBatch = std::function<std::optional<Batch>()>;

}  // namespace cnn
