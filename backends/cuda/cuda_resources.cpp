#include "backends/cuda/detail/cuda_resources.hpp"

#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include <cnnengine/memory/memory_resource.hpp>
#include <cnnengine/memory/out_of_memory.hpp>

namespace cnn::memory {
namespace {

std::string cuda_error(const char* call, cudaError_t status) {
  return std::string(call) + " failed: " + cudaGetErrorName(status) + ": " + cudaGetErrorString(status);
}

void check_alignment(std::size_t alignment, std::size_t guaranteed, const std::string& resource) {
  if (alignment > guaranteed || (alignment & (alignment - 1)) != 0) {
    throw ConfigError(resource + ": alignment " + std::to_string(alignment) +
                      " is not a power of two at most " + std::to_string(guaranteed));
  }
}

// Makes `device` current for the lifetime of the guard: allocations land on the right GPU
// whichever thread asks.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device) {
      cudaError_t status = cudaSetDevice(device);
      if (status != cudaSuccess) throw DeviceError(cuda_error("cudaSetDevice", status));
    }
    changed_ = previous_ != device && previous_ >= 0;
  }
  ~DeviceGuard() {
    if (changed_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  bool changed_ = false;
};

}  // namespace

CudaDeviceResource::CudaDeviceResource(int device) : device_(device) {}

std::string CudaDeviceResource::name() const { return "cuda device " + std::to_string(device_); }

void* CudaDeviceResource::do_allocate(std::size_t bytes, std::size_t alignment, Category category) {
  check_alignment(alignment, 256, name());
  DeviceGuard guard(device_);
  void* ptr = nullptr;
  cudaError_t status = cudaMalloc(&ptr, bytes ? bytes : 1);
  if (status == cudaSuccess) return ptr;
  cudaGetLastError();  // a failed cudaMalloc leaves its error for the next launch check to find
  if (status != cudaErrorMemoryAllocation) throw DeviceError(cuda_error("cudaMalloc", status));

  OutOfMemoryDetails details;
  details.requested = bytes;
  details.category = category;
  details.resource = name();
  std::size_t free = 0, total = 0;
  std::string device_state;
  if (cudaMemGetInfo(&free, &total) == cudaSuccess) {
    details.limit = total;
    details.total_free = free;
    device_state = "; the device has " + format_bytes(free) + " free of " + format_bytes(total) +
                   " (other processes and the CUDA context count too)";
  } else {
    cudaGetLastError();
  }
  throw OutOfMemory(describe(details) + device_state, details);
}

// Asked while a refusal is described too: it answers 0 rather than throw.
std::size_t CudaDeviceResource::largest_free_block() const {
  std::size_t free = 0, total = 0;
  try {
    DeviceGuard guard(device_);
    if (cudaMemGetInfo(&free, &total) == cudaSuccess) return free;
  } catch (const DeviceError&) {
  }
  cudaGetLastError();
  return 0;
}

void CudaDeviceResource::do_deallocate(void* ptr, std::size_t, std::size_t, Category) {
  if (!ptr) return;
  DeviceGuard guard(device_);
  // Destructors land here, so no throw; a failure that matters (a device fault) is sticky and
  // the backend's next checked call reports it.
  if (cudaFree(ptr) != cudaSuccess) cudaGetLastError();
}

void* CudaPinnedResource::do_allocate(std::size_t bytes, std::size_t alignment, Category category) {
  check_alignment(alignment, 4096, name());  // cudaMallocHost returns whole pages
  void* ptr = nullptr;
  cudaError_t status = cudaMallocHost(&ptr, bytes ? bytes : 1);
  if (status == cudaSuccess) {
    if (reinterpret_cast<std::uintptr_t>(ptr) % alignment == 0) return ptr;
    cudaFreeHost(ptr);
    throw ConfigError(name() + ": cudaMallocHost returned memory aligned below " +
                      std::to_string(alignment) + " bytes");
  }
  cudaGetLastError();
  if (status != cudaErrorMemoryAllocation) throw DeviceError(cuda_error("cudaMallocHost", status));
  OutOfMemoryDetails details;
  details.requested = bytes;
  details.category = category;
  details.resource = name();
  throw OutOfMemory(describe(details) + " (pinned memory is limited by the system's locked-page limit)",
                    details);
}

void CudaPinnedResource::do_deallocate(void* ptr, std::size_t, std::size_t, Category) {
  if (ptr && cudaFreeHost(ptr) != cudaSuccess) cudaGetLastError();
}

}  // namespace cnn::memory
