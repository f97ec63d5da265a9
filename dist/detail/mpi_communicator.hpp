#pragma once
// The Communicator over MPI_COMM_WORLD: host memory only (the CPU backend's tensors and host
// values). Sums are MPI_Allreduce / MPI_Iallreduce in place; started sums progress whenever
// progress() or wait_started() calls into MPI (Open MPI has no progress thread by default).
#include <mpi.h>

#include <vector>

#include <cnnengine/engine/core/communicator.hpp>

namespace cnn::dist {

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator();

  int rank() const override { return rank_; }
  int ranks() const override { return ranks_; }
  std::string describe() const override;
  DeviceKind memory_kind() const override { return DeviceKind::cpu; }
  std::size_t reserved_bytes(std::size_t in_flight_bytes) const override;

  void sum_host(std::span<double> values) override;
  void max_host(std::span<double> values) override;
  void broadcast_host(std::span<std::byte> bytes) override;
  void sum(const Tensor& values) override;
  void start_sum(const Tensor& values) override;
  void progress() override;
  void wait_started() override;

 private:
  void reduce_host(std::span<double> values, MPI_Op op);

  int rank_ = 0, ranks_ = 1;
  std::vector<MPI_Request> started_;
};

// An MPI call's result: anything but MPI_SUCCESS is a DeviceError naming the call and MPI's words
// (with the default error handler MPI aborts first; the session sets MPI_ERRORS_RETURN).
void check_mpi(int status, const char* call);
// The library's name and version ("Open MPI v4.1.4"): the first words of MPI_Get_library_version.
std::string mpi_library_version();

}  // namespace cnn::dist
