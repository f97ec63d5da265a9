#pragma once
// The CUDA upstreams: device memory (cudaMalloc) and pinned host memory (cudaMallocHost). They
// count nothing themselves; wrap them in the statistics or budget adaptors for that.
// No CUDA header here: code without nvcc may hold and pass these resources.
#include <cnnengine/memory/memory_resource.hpp>

namespace cnn::memory {

class CudaDeviceResource final : public MemoryResource {
 public:
  explicit CudaDeviceResource(int device = 0);
  int device() const { return device_; }
  // The device's free memory (cudaMemGetInfo): the most a request could get, other processes
  // and the libraries allocating too; 0 where the device cannot say. Under a budget adaptor, cut
  // to what the budget leaves.
  std::size_t largest_free_block() const override;
  bool is_device_memory() const override { return true; }
  std::string name() const override;

 private:
  // alignment up to 256 (cudaMalloc's guarantee); more is a ConfigError.
  void* do_allocate(std::size_t bytes, std::size_t alignment, Category category) override;
  void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment, Category category) override;

  int device_;
};

class CudaPinnedResource final : public MemoryResource {
 public:
  std::string name() const override { return "cuda pinned host"; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, Category category) override;
  void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment, Category category) override;
};

}  // namespace cnn::memory
