#pragma once
// Data-parallel training, the trainer's side (docs/design.md, "Data-parallel training"): one
// Trainer is one of Communicator::ranks() replicas of a model. This holds what the replicas
// share and must agree on: the gradient buckets (Note [Collective order]), synchronised
// BatchNorm's scratch, a step's status summed over the ranks, rank 0's state over every rank's,
// and the micro-batch under synchronised BatchNorm (Note [Synchronised micro-batches]).
#include <array>
#include <cstddef>
#include <functional>
#include <memory>
#include <span>

#include <cnnengine/engine/core/communicator.hpp>
#include <cnnengine/engine/core/layer.hpp>
#include <cnnengine/engine/core/network.hpp>
#include <cnnengine/engine/core/parameter_store.hpp>
#include "engine/train/detail/gradient_buckets.hpp"
#include "memory/buffer.hpp"

namespace cnn {

struct TrainerOptions;

class Replicas {
 public:
  // Refuses what a data-parallel run cannot take, and synchronised BatchNorm without one.
  static void check(const TrainerOptions& options, const Backend& backend);
  // Bytes the communicator holds for the sums that may be in flight at once (the plan counts them).
  static std::size_t communication_bytes(const TrainerOptions& options, const Network& network);
  // Synchronised BatchNorm's scratch: two floats per channel of the widest BatchNorm layer.
  static std::size_t scratch_floats(const Network& network);

  // Its scratch (synchronised BatchNorm) from `blocks`. `options.communicator` must be set.
  Replicas(Network& network, Backend& backend, ParameterStore& params, memory::MemoryResource& blocks,
           const TrainerOptions& options);

  int rank() const { return communicator_.rank(); }
  int ranks() const { return communicator_.ranks(); }
  bool synchronised_batchnorm() const { return sync_batchnorm_ && ranks() > 1; }
  GradientBuckets& buckets() { return buckets_; }
  // What a BatchNorm layer sums with; null without synchronised BatchNorm.
  CrossRankContext* cross_rank() { return cross_rank_.communicator ? &cross_rank_ : nullptr; }

  // The smallest of the ranks' micro-batches: a rank whose is larger rebuilds at it with
  // `build` (which returns what it could build, maybe less), until they agree.
  int agree_micro_batch(int micro_batch, const std::function<int(int)>& build);
  // After a step's micro-batches: the gradient buckets finished, the running statistics rank
  // 0's (BatchNorm per rank), and `sums` ({ranks that failed, loss sum, correct}) added over the
  // ranks. Returns the seconds it took (what computation did not hide).
  double finish_step(std::array<double, 4>& sums);
  // Rank 0's parameters and optimizer state over every rank's.
  void synchronize();
  // Host values added over the ranks (an evaluation's sums).
  void sum(std::span<double> values) { communicator_.sum_host(values); }

 private:
  // Rank 0's values over every rank's, in pieces no larger than a bucket.
  void broadcast_from_rank0(const Tensor& values);

  Communicator& communicator_;
  Backend& backend_;
  ParameterStore& params_;
  bool sync_batchnorm_;
  std::size_t piece_bytes_;
  GradientBuckets buckets_;
  memory::Buffer scratch_;
  CrossRankContext cross_rank_;
};

}  // namespace cnn
