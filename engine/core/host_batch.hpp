#pragma once
// A batch as the caller hands it to the engine, in host memory: what a trainer trains on and
// what a predictor evaluates. Both runners speak it, so it lives below them.
#include <cstdint>
#include <functional>
#include <optional>

namespace cnn {

struct HostBatch {
  const float* images = nullptr;  // size samples, NCHW
  const std::int32_t* labels = nullptr;
  int size = 0;
  // Data-parallel: these `size` samples are this rank's share of a batch of `global_size`,
  // from its sample `first` (share_of_batch). 0: the batch is all there is.
  int first = 0;
  int global_size = 0;
  // The images and labels are in the backend's memory instead (a benchmark's batch, made once on
  // the device: benchmarks/train_throughput). They are copied device to device into each
  // micro-batch's slots and not checked (no pixel nor label is read on the host): the caller
  // vouches for them. Training only.
  bool on_device = false;
};
using NextBatch = std::function<std::optional<HostBatch>()>;

}  // namespace cnn
