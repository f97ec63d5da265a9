#if CNN_HAVE_NCCL
#include "backends/cuda/detail/nccl_communicator.hpp"

#include "backends/cuda/detail/check.hpp"
#include <cnnengine/base/error.hpp>

namespace cnn::cuda {
namespace {

// Never an OutOfMemory, though NCCL's buffers may not have fitted: the other ranks are inside the
// same collective by now, and a rank that replayed its step alone would leave them there. The
// failure ends the job (train_images: MPI_Abort), saying what NCCL said.
void check_nccl(ncclResult_t status, const char* call) {
  if (status == ncclSuccess) return;
  const char* last = ncclGetLastError(nullptr);
  throw DeviceError(std::string("NCCL: ") + call + " failed: " + ncclGetErrorString(status) +
                    (last && *last ? std::string(" (") + last + ")" : std::string()));
}

std::size_t free_device_bytes() {
  std::size_t free = 0, total = 0;
  CNN_CHECK(cudaMemGetInfo(&free, &total));
  return free;
}

}  // namespace

NcclCommunicator::NcclCommunicator(CudaBackend& backend, Communicator& host) : backend_(backend), host_(host) {
  backend_.make_current();
  ncclUniqueId id{};
  if (host_.rank() == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  host_.broadcast_host(std::as_writable_bytes(std::span<ncclUniqueId>(&id, 1)));
  const std::size_t free_before = free_device_bytes();
  check_nccl(ncclCommInitRank(&comm_, host_.ranks(), id, host_.rank()), "ncclCommInitRank");
  CNN_CHECK(cudaStreamCreateWithFlags(&sums_, cudaStreamNonBlocking));
  CNN_CHECK(cudaEventCreateWithFlags(&compute_ready_, cudaEventDisableTiming));
  CNN_CHECK(cudaEventCreateWithFlags(&sums_done_, cudaEventDisableTiming));
  // NCCL connects and sets up its buffers lazily (NCCL_RUNTIME_CONNECT), for the algorithm and
  // protocol a sum's size picks: sums of a gradient bucket's size and of one float (synchronised
  // BatchNorm's and a short last bucket's sizes) now, so that what they take is measured before
  // the trainer plans with the rest.
  constexpr std::size_t kWarmUpFloats = std::size_t{1} << 18;  // TrainerOptions' default bucket, 1 MiB
  float* warm_up = nullptr;
  CNN_CHECK(cudaMalloc(&warm_up, kWarmUpFloats * sizeof(float)));
  CNN_CHECK(cudaMemsetAsync(warm_up, 0, kWarmUpFloats * sizeof(float), sums_));
  for (std::size_t floats : {kWarmUpFloats, std::size_t{1}})
    check_nccl(ncclAllReduce(warm_up, warm_up, floats, ncclFloat, ncclSum, comm_, sums_), "ncclAllReduce");
  CNN_CHECK(cudaStreamSynchronize(sums_));
  CNN_CHECK(cudaFree(warm_up));
  const std::size_t free_after = free_device_bytes();
  nccl_bytes_ = free_before > free_after ? free_before - free_after : 0;
}

NcclCommunicator::~NcclCommunicator() {
  if (sums_) cudaStreamSynchronize(sums_);
  if (comm_) ncclCommDestroy(comm_);
  if (compute_ready_) cudaEventDestroy(compute_ready_);
  if (sums_done_) cudaEventDestroy(sums_done_);
  if (sums_) cudaStreamDestroy(sums_);
}

std::string NcclCommunicator::describe() const {
  int version = 0;
  ncclGetVersion(&version);
  return "NCCL " + std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
         std::to_string(version % 100) + " over " + host_.describe();
}

void NcclCommunicator::sum(const Tensor& values) {
  check_nccl(ncclAllReduce(values.data, values.data, values.elements(), ncclFloat, ncclSum, comm_,
                           backend_.compute_stream()),
             "ncclAllReduce");
}

void NcclCommunicator::start_sum(const Tensor& values) {
  CNN_CHECK(cudaEventRecord(compute_ready_, backend_.compute_stream()));
  CNN_CHECK(cudaStreamWaitEvent(sums_, compute_ready_, 0));
  check_nccl(ncclAllReduce(values.data, values.data, values.elements(), ncclFloat, ncclSum, comm_, sums_),
             "ncclAllReduce");
  started_ = true;
}

void NcclCommunicator::wait_started() {
  if (!started_) return;
  CNN_CHECK(cudaEventRecord(sums_done_, sums_));
  CNN_CHECK(cudaStreamWaitEvent(backend_.compute_stream(), sums_done_, 0));
  started_ = false;
}

}  // namespace cnn::cuda
#endif
