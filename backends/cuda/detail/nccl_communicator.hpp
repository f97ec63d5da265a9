#pragma once
// The Communicator of a data-parallel run on CUDA devices: sums of device floats with NCCL on the
// backend's compute stream (in order with the kernels), started sums on a stream of their own so
// that they overlap the backward kernels after them; host values and the bootstrap (NCCL's unique
// id, from rank 0) through the host communicator (MPI), which outlives this one.
#include <cuda_runtime.h>
#include <nccl.h>

#include "backends/cuda/detail/cuda_backend_impl.hpp"
#include <cnnengine/engine/core/communicator.hpp>

namespace cnn::cuda {

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(CudaBackend& backend, Communicator& host);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return host_.rank(); }
  int ranks() const override { return host_.ranks(); }
  std::string describe() const override;
  DeviceKind memory_kind() const override { return DeviceKind::cuda; }
  // What NCCL took on the device when it started (measured), whatever the sums' sizes.
  std::size_t reserved_bytes(std::size_t) const override { return nccl_bytes_; }

  void sum_host(std::span<double> values) override { host_.sum_host(values); }
  void max_host(std::span<double> values) override { host_.max_host(values); }
  void broadcast_host(std::span<std::byte> bytes) override { host_.broadcast_host(bytes); }
  void sum(const Tensor& values) override;
  void start_sum(const Tensor& values) override;
  void wait_started() override;

 private:
  CudaBackend& backend_;
  Communicator& host_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t sums_ = nullptr;        // the started sums
  cudaEvent_t compute_ready_ = nullptr, sums_done_ = nullptr;
  bool started_ = false;
  std::size_t nccl_bytes_ = 0;
};

}  // namespace cnn::cuda
