#include "backends/cuda/detail/check.hpp"

#include <stdexcept>
#include <string>

#include <cnnengine/memory/memory_resource.hpp>
#include <cnnengine/memory/out_of_memory.hpp>

namespace cnn::cuda {
namespace {

// "cudnnConvolutionForward(handle_, ...)" -> "cudnnConvolutionForward"
std::string call_name(const char* call) {
  std::string text(call);
  auto paren = text.find('(');
  return paren == std::string::npos ? text : text.substr(0, paren);
}

[[noreturn]] void throw_out_of_memory(const std::string& call, const std::string& error) {
  memory::OutOfMemoryDetails details;
  details.category = memory::Category::workspace;  // what the libraries allocate for themselves
  int device = 0;
  std::size_t free = 0, total = 0;
  std::string state;
  if (cudaGetDevice(&device) == cudaSuccess && cudaMemGetInfo(&free, &total) == cudaSuccess) {
    details.limit = total;
    details.total_free = free;
    state = "; the device has " + memory::format_bytes(free) + " free of " + memory::format_bytes(total);
  }
  cudaGetLastError();
  details.resource = "cuda device " + std::to_string(device) + " (inside " + call + ")";
  throw memory::OutOfMemory(call + " ran out of device memory (" + error + ")" + state, details);
}

}  // namespace

void throw_cuda_error(cudaError_t status, const char* call) {
  std::string name = call_name(call);
  std::string error = std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky: clear it so that the next launch check does not see it
    throw_out_of_memory(name, error);
  }
  throw DeviceError(name + " failed: " + error);
}

void throw_cudnn_error(cudnnStatus_t status, const char* call) {
  std::string name = call_name(call);
  std::string error = cudnnGetErrorString(status);
  char detail[512] = {};
  cudnnGetLastErrorString(detail, sizeof detail);
  if (detail[0]) error += std::string(" (") + detail + ")";
  // cuDNN 9 splits the old CUDNN_STATUS_ALLOC_FAILED (now an alias of the host case) into host and
  // device allocation failures; running out of device memory is the device one.
  if (status == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED ||
      status == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED) {
    throw_out_of_memory(name, error);
  }
  throw DeviceError(name + " failed: " + error);
}

void throw_cublas_error(cublasStatus_t status, const char* call) {
  std::string name = call_name(call);
  std::string error = std::string(cublasGetStatusName(status)) + ": " + cublasGetStatusString(status);
  if (status == CUBLAS_STATUS_ALLOC_FAILED) throw_out_of_memory(name, error);
  throw DeviceError(name + " failed: " + error);
}

}  // namespace cnn::cuda
