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

// How a failed call is reported, by what its status says ran out.
[[noreturn]] void throw_failure(Shortage shortage, const std::string& call, const std::string& error) {
  switch (shortage) {
    case Shortage::device_memory: throw_out_of_memory(call, error);
    case Shortage::host_memory: throw HostOutOfMemory(call + " ran out of host memory (" + error + ")");
    case Shortage::none: break;
  }
  throw DeviceError(call + " failed: " + error);
}

}  // namespace

void throw_cuda_error(cudaError_t status, const char* call) {
  std::string name = call_name(call);
  std::string error = std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
  // Not sticky: cleared, so that the next launch check does not see it.
  if (shortage_of(status) == Shortage::device_memory) cudaGetLastError();
  throw_failure(shortage_of(status), name, error);
}

void throw_cudnn_error(cudnnStatus_t status, const char* call) {
  std::string name = call_name(call);
  std::string error = cudnnGetErrorString(status);
  char detail[512] = {};
  cudnnGetLastErrorString(detail, sizeof detail);
  if (detail[0]) error += std::string(" (") + detail + ")";
  throw_failure(shortage_of(status), name, error);
}

void throw_cublas_error(cublasStatus_t status, const char* call) {
  std::string name = call_name(call);
  std::string error = std::string(cublasGetStatusName(status)) + ": " + cublasGetStatusString(status);
  throw_failure(shortage_of(status), name, error);
}

}  // namespace cnn::cuda
