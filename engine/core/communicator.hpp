#pragma once
// The ranks of a data-parallel run as the trainer sees them: N processes train one model, each
// on its own share of every batch, and sum what they must through this interface. MPI implements
// it on the CPU (dist/), NCCL on CUDA devices (backends/cuda/), a test its own way. Every rank
// makes the same calls in the same order; a call one rank skips is a deadlock, which is why the
// trainer, not the layers, decides when they happen (Note [Collective order], in the trainer's
// gradient buckets).
#include <cstddef>
#include <span>
#include <string>

#include <cnnengine/engine/core/backend_types.hpp>
#include <cnnengine/engine/core/tensor.hpp>

namespace cnn {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int ranks() const = 0;
  // "MPI (Open MPI 4.1.4), 2 ranks", for the start-up report.
  virtual std::string describe() const = 0;
  // Whose memory the Tensor sums below take: the trainer's backend must be of this kind.
  virtual DeviceKind memory_kind() const = 0;
  // Device bytes the communicator holds outside the trainer's memory stack (NCCL's own buffers,
  // MPI's temporaries) while sums of `in_flight_bytes` in all are under way at once: the budget
  // leaves them, as it leaves the libraries' workspaces.
  virtual std::size_t reserved_bytes(std::size_t in_flight_bytes) const = 0;

  // Host doubles summed over the ranks in place. Blocks until every rank has called.
  virtual void sum_host(std::span<double> values) = 0;
  // The largest over the ranks, in place (the smallest: of the values negated).
  virtual void max_host(std::span<double> values) = 0;
  // Rank 0's bytes copied over every rank's.
  virtual void broadcast_host(std::span<std::byte> bytes) = 0;

  // Floats in the backend's memory summed over the ranks in place, in the order of the device's
  // work: after the kernels issued before the call, before those issued after it (the CPU: now).
  virtual void sum(const Tensor& values) = 0;
  // The same without waiting: the sum starts once the kernels issued before it are done and is
  // complete after wait_started(). The values may not be touched before then.
  virtual void start_sum(const Tensor& values) = 0;
  // Lets started sums move on (MPI progresses only inside its own calls): called between layers.
  virtual void progress() {}
  // Every started sum is complete (for the device's work issued after this call).
  virtual void wait_started() = 0;
};

}  // namespace cnn
