#pragma once
// Which GPUs this build's kernels run on.
#include <cuda_runtime.h>

#include <vector>

namespace cnn::cuda {

// The virtual architectures the kernels were compiled for, as 10 * major + minor (90 = sm_90).
std::vector<int> compiled_architectures();
// Whether the current device can run this build's kernels: cudaSuccess, or the reason
// (cudaErrorNoKernelImageForDevice when it is older than every compiled architecture).
cudaError_t kernel_image_status();

}  // namespace cnn::cuda
