#pragma once
// Every CUDA, cuDNN and cuBLAS call goes through these checks. A failure becomes a
// DeviceError naming the call and the library's error string; running out of device memory
// (cudaErrorMemoryAllocation, cuDNN 9's CUDNN_STATUS_INTERNAL_ERROR_{DEVICE,HOST}_ALLOCATION_FAILED,
// CUBLAS_STATUS_ALLOC_FAILED) becomes memory::OutOfMemory, so the trainer can shrink the
// micro-batch and replay the step.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

namespace cnn::cuda {

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
