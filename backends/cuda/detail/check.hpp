#pragma once
// Every CUDA, cuDNN and cuBLAS call goes through these checks. A failure becomes a
// DeviceError naming the call and the library's error string; running out of device memory
// (cudaErrorMemoryAllocation, cuDNN 9's CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED,
// CUBLAS_STATUS_ALLOC_FAILED) becomes memory::OutOfMemory, so the trainer can shrink the
// micro-batch and replay the step. A library that could not allocate host memory (cuDNN 9's
// CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, of which CUDNN_STATUS_ALLOC_FAILED is an
// alias) becomes HostOutOfMemory: a smaller micro-batch on the device would not mend it.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <new>
#include <stdexcept>
#include <string>

namespace cnn::cuda {

// What a failed call's status says ran out, if anything.
enum class Shortage { none, device_memory, host_memory };

constexpr Shortage shortage_of(cudaError_t status) {
  return status == cudaErrorMemoryAllocation ? Shortage::device_memory : Shortage::none;
}
constexpr Shortage shortage_of(cudnnStatus_t status) {
  switch (status) {
    case CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED: return Shortage::device_memory;
    case CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED: return Shortage::host_memory;
    default: return Shortage::none;
  }
}
constexpr Shortage shortage_of(cublasStatus_t status) {
  return status == CUBLAS_STATUS_ALLOC_FAILED ? Shortage::device_memory : Shortage::none;
}

// The host ran out of memory inside a library call: a std::bad_alloc, as any other host
// allocation of the process reports it, with a message that names the call. Not a
// memory::OutOfMemory, which the trainer answers by shrinking the device's micro-batch.
class HostOutOfMemory : public std::bad_alloc {
 public:
  explicit HostOutOfMemory(const std::string& message) : message_(message) {}
  const char* what() const noexcept override { return message_.what(); }

 private:
  std::runtime_error message_;  // its copies cannot throw, as an exception's must not
};

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call);
[[noreturn]] void throw_cudnn_error(cudnnStatus_t status, const char* call);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call);

inline void check(cudaError_t status, const char* call) {
  if (status != cudaSuccess) throw_cuda_error(status, call);
}
inline void check(cudnnStatus_t status, const char* call) {
  if (status != CUDNN_STATUS_SUCCESS) throw_cudnn_error(status, call);
}
inline void check(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS) throw_cublas_error(status, call);
}

// After a kernel launch: launch errors (bad configuration, no kernel image for this GPU).
inline void check_launch(const char* kernel) { check(cudaGetLastError(), kernel); }

}  // namespace cnn::cuda

#define CNN_CHECK(call) ::cnn::cuda::check((call), #call)
