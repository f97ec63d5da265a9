#pragma once
// Two sums over a block's threads in a fixed tree, so that the same inputs give the same bits on
// every run: the reductions of the kernels that sum per block (group norm's statistics, the
// task losses, synchronised BatchNorm's channel sums).

namespace cnn::cuda {

// The block's sums of a and b (one value each of its kThreads threads); every thread gets them.
// The shared arrays are free again when it returns, so a kernel may call it more than once.
template <int kThreads>
__device__ void block_sums(double& a, double& b) {
  __shared__ double sa[kThreads], sb[kThreads];
  sa[threadIdx.x] = a;
  sb[threadIdx.x] = b;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      sa[threadIdx.x] += sa[threadIdx.x + half];
      sb[threadIdx.x] += sb[threadIdx.x + half];
    }
    __syncthreads();
  }
  a = sa[0];
  b = sb[0];
  __syncthreads();
}

}  // namespace cnn::cuda
