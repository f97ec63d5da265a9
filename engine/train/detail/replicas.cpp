#include "engine/train/detail/replicas.hpp"

#include <algorithm>
#include <chrono>
#include <string>

#include <cnnengine/engine/core/backend.hpp>
#include <cnnengine/engine/train/trainer.hpp>

namespace cnn {
namespace {

// A blocking sum of a whole block in pieces of at most `piece_bytes`, so that what the
// communicator holds for it stays within what the plan counted (communication_bytes).
void sum_in_pieces(Communicator& c, const Tensor& values, std::size_t piece_bytes) {
  constexpr std::size_t kLargestPiece = std::size_t{1} << 30;  // floats: a Shape's dimension is an int
  const std::size_t piece = std::clamp<std::size_t>(piece_bytes / sizeof(float), 1, kLargestPiece);
  for (std::size_t done = 0; done < values.elements(); done += piece) {
    const std::size_t n = std::min(piece, values.elements() - done);
    c.sum(Tensor{values.data + done, Shape{static_cast<int>(n)}});
  }
}

}  // namespace

void Replicas::check(const TrainerOptions& options, const Backend& backend) {
  const Communicator* c = options.communicator;
  if (!c) {
    if (options.sync_batchnorm) throw ConfigError("synchronised BatchNorm needs a data-parallel run (a communicator)");
    return;
  }
  if (c->memory_kind() != backend.kind())
    throw ConfigError("the communicator (" + c->describe() + ") sums " + to_string(c->memory_kind()) +
                      " memory; this trainer's backend is " + to_string(backend.kind()));
  if (options.gradient_bucket_bytes < sizeof(float))
    throw ConfigError("gradient_bucket_bytes of " + std::to_string(options.gradient_bucket_bytes) +
                      ": a bucket holds at least one float");
  if (options.batch < c->ranks())
    throw ConfigError("a batch of " + std::to_string(options.batch) + " over " + std::to_string(c->ranks()) +
                      " ranks: every rank needs a sample (a batch of at least the number of ranks)");
  if (options.sync_batchnorm) {
    if (options.batch % c->ranks() != 0)
      throw ConfigError("synchronised BatchNorm needs the batch (" + std::to_string(options.batch) +
                        ") shared evenly over the " + std::to_string(c->ranks()) + " ranks");
  }
}

// Every gradient bucket (started as backward goes, waited for together), or one piece of a
// blocking sum (sum_in_pieces).
std::size_t Replicas::communication_bytes(const TrainerOptions& options, const Network& network) {
  const Communicator* c = options.communicator;
  if (!c) return 0;
  const std::size_t gradients = ParameterStore::planned_bytes(network, 0)[memory::Category::parameter_gradients];
  return c->reserved_bytes(std::max(gradients, options.gradient_bucket_bytes));
}

std::size_t Replicas::scratch_floats(const Network& network) {
  std::size_t floats = 0;
  for (int id = 1; id < network.size(); ++id)
    floats = std::max(floats, network.node(id).layer->cross_rank_scratch_floats());
  return floats;
}

Replicas::Replicas(Network& network, Backend& backend, ParameterStore& params, memory::MemoryResource& blocks,
                   const TrainerOptions& options)
    : communicator_(*options.communicator),
      backend_(backend),
      params_(params),
      sync_batchnorm_(options.sync_batchnorm),
      piece_bytes_(options.gradient_bucket_bytes),
      buckets_(network, params, *options.communicator, options.gradient_bucket_bytes) {
  if (sync_batchnorm_) {
    const std::size_t floats = std::max<std::size_t>(scratch_floats(network), 1);
    scratch_ = memory::Buffer(blocks, floats * sizeof(float), memory::Category::other);
    cross_rank_ = CrossRankContext{&communicator_, Tensor{scratch_.floats(), Shape{static_cast<int>(floats)}}};
  }
}

// Note [Synchronised micro-batches]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Synchronised BatchNorm sums every rank's micro-batch j together, once per BatchNorm layer: the
// ranks must run the same micro-batches, or one waits in a sum the others never make. The
// shares are equal (Trainer::check_step_batch), so the micro-batch size must be too; it can
// differ after start-up (a device that holds less than the plan), an evaluation that ran out of
// memory on one rank, or a restored state. Before each step the ranks agree on the smallest; one
// whose device cannot build even that goes lower, and they agree again.
int Replicas::agree_micro_batch(int micro_batch, const std::function<int(int)>& build) {
  for (;;) {
    double range[2] = {static_cast<double>(micro_batch), -static_cast<double>(micro_batch)};
    communicator_.max_host(range);
    const int largest = static_cast<int>(range[0]), smallest = static_cast<int>(-range[1]);
    if (largest == smallest) return micro_batch;
    if (micro_batch != smallest) micro_batch = build(smallest);
  }
}

double Replicas::finish_step(std::array<double, 4>& sums) {
  const auto start = std::chrono::steady_clock::now();
  buckets_.finish();
  // BatchNorm's running statistics moved with each rank's own batches: keep rank 0's (as DDP's
  // broadcast_buffers). Synchronised BatchNorm's moved alike on every rank.
  if (!sync_batchnorm_) broadcast_from_rank0(params_.running_state());
  communicator_.sum_host(sums);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void Replicas::synchronize() {
  for (ParameterStore::Block block : {ParameterStore::Block::parameters, ParameterStore::Block::optimizer_state})
    if (params_.floats(block) > 0) broadcast_from_rank0(params_.block_view(block));
  backend_.synchronize();
}

// A sum in which the other ranks add zeros (exact: x + 0 = x).
void Replicas::broadcast_from_rank0(const Tensor& values) {
  if (values.empty()) return;
  if (communicator_.rank() != 0) backend_.fill(values, 0.f);
  sum_in_pieces(communicator_, values, piece_bytes_);
}

}  // namespace cnn
