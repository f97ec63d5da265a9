#include "backends/cuda/detail/architectures.hpp"

namespace cnn::cuda {
namespace {

__global__ void empty_kernel() {}

}  // namespace

std::vector<int> compiled_architectures() {
  // nvcc lists them as 100 * major + 10 * minor.
  std::vector<int> archs{__CUDA_ARCH_LIST__};
  for (int& a : archs) a /= 10;
  return archs;
}

cudaError_t kernel_image_status() {
  cudaFuncAttributes attributes{};
  cudaError_t status = cudaFuncGetAttributes(&attributes, empty_kernel);
  if (status != cudaSuccess) cudaGetLastError();
  return status;
}

}  // namespace cnn::cuda
