// Softmax cross-entropy fused with its gradient and the accuracy count, with PyTorch's label
// smoothing. One block: each warp takes rows in turn and the block adds the warps' sums in a fixed
// order, so the loss is the same on every run (an atomicAdd per row would not be). Smoothing is a
// kernel of its own (a template argument): without it the arithmetic is the plain loss's, to the bit.
#include <cmath>
#include <climits>
#include <stdexcept>
#include <string>

#include "backends/cuda/detail/check.hpp"
#include "backends/cuda/detail/cuda_backend_impl.hpp"
#include <cnnengine/base/error.hpp>

namespace cnn::cuda {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;

__device__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// The largest value and its first index across the warp.
__device__ void warp_argmax(float& value, int& index) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const float v = __shfl_xor_sync(0xffffffffu, value, offset);
    const int i = __shfl_xor_sync(0xffffffffu, index, offset);
    if (v > value || (v == value && i < index)) {
      value = v;
      index = i;
    }
  }
}

template <bool Smoothed>
__global__ void __launch_bounds__(kThreads)
softmax_cross_entropy_kernel(const float* logits, const int* labels, int rows, int classes, float smoothing,
                             float* dlogits, const StepScalars* step, float* loss_sum, float* correct,
                             volatile LabelError* error) {
  // From device memory: a replayed graph reads the current micro-batch's.
  const float grad_scale = dlogits ? step->grad_scale : 0.0f;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float warp_loss = 0.0f, warp_correct = 0.0f;
  // The first bad label of this launch is reported. The claim is a shared-memory atomic: atomics
  // on mapped host memory need PCIe atomics, which a machine may not offer.
  __shared__ int claimed;
  if (threadIdx.x == 0) claimed = 0;
  __syncthreads();

  for (int row = warp; row < rows; row += kWarps) {
    const float* x = logits + static_cast<std::size_t>(row) * classes;
    float best = -INFINITY;
    int best_index = INT_MAX;  // lanes without a class keep it and lose every comparison
    for (int j = lane; j < classes; j += 32) {
      if (x[j] > best || best_index == INT_MAX) {
        best = x[j];
        best_index = j;
      }
    }
    warp_argmax(best, best_index);

    float sum = 0.0f;
    for (int j = lane; j < classes; j += 32) sum += expf(x[j] - best);
    sum = warp_sum(sum);
    float mean = 0.0f;  // of x - best over the classes: the smoothing's term
    if (Smoothed) {
      for (int j = lane; j < classes; j += 32) mean += x[j] - best;
      mean = warp_sum(mean) / static_cast<float>(classes);
    }

    const int label = labels[row];
    const bool valid = label >= 0 && label < classes;
    if (!valid && lane == 0 && atomicCAS(&claimed, 0, 1) == 0 && !error->raised) {
      error->row = row;
      error->label = label;
      error->classes = classes;
      error->pixel_row = error->pixel_column = -1;
      __threadfence_system();
      error->raised = 1;
    }
    if (dlogits) {
      float* d = dlogits + static_cast<std::size_t>(row) * classes;
      for (int j = lane; j < classes; j += 32) {
        const float p = expf(x[j] - best) / sum;
        if (Smoothed) {
          const float target = (j == label ? 1.0f - smoothing : 0.0f) + smoothing / static_cast<float>(classes);
          d[j] = valid ? (p - target) * grad_scale : 0.0f;
        } else {
          d[j] = valid ? (p - (j == label ? 1.0f : 0.0f)) * grad_scale : 0.0f;
        }
      }
    }
    if (valid) {
      if (Smoothed)
        warp_loss += (1.0f - smoothing) * (logf(sum) + best - x[label]) + smoothing * (logf(sum) - mean);
      else
        warp_loss += logf(sum) + best - x[label];
      warp_correct += best_index == label ? 1.0f : 0.0f;
    }
  }

  __shared__ float losses[kWarps], corrects[kWarps];
  if (lane == 0) {
    losses[warp] = warp_loss;
    corrects[warp] = warp_correct;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float loss = 0.0f, hits = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      loss += losses[w];
      hits += corrects[w];
    }
    loss_sum[0] += loss;
    correct[0] += hits;
  }
}

}  // namespace

void CudaBackend::do_softmax_cross_entropy(const Tensor& logits, const IntTensor& labels, float label_smoothing,
                                           Tensor dlogits, const StepScalars* step, Tensor loss_sum, Tensor correct) {
  activate();
  const int rows = logits.n();
  const std::size_t classes = logits.sample_elements();
  if (labels.size != static_cast<std::size_t>(rows) || classes == 0 || classes > INT_MAX ||
      (!dlogits.empty() && dlogits.elements() != logits.elements()) || loss_sum.elements() < 1 ||
      correct.elements() < 1) {
    throw ShapeError("softmax_cross_entropy: logits " + logits.shape.str() + " with " +
                     std::to_string(labels.size) + " labels, gradient " + dlogits.shape.str() +
                     " and one-element loss and accuracy tensors do not fit together");
  }
  if (rows == 0) return;
  const auto kernel =
      label_smoothing != 0.0f ? softmax_cross_entropy_kernel<true> : softmax_cross_entropy_kernel<false>;
  kernel<<<1, kThreads, 0, compute_>>>(logits.data, labels.data, rows, static_cast<int>(classes), label_smoothing,
                                       dlogits.empty() ? nullptr : dlogits.data, step, loss_sum.data, correct.data,
                                       label_error_device_);
  check_launch("softmax_cross_entropy_kernel");
  touched(logits, labels, dlogits, loss_sum, correct, scalars_range(step));
}

}  // namespace cnn::cuda
