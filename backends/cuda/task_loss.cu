// The losses of the tasks beyond classification on CUDA (base/task.hpp gives their definitions):
// per-pixel softmax cross-entropy, sigmoid binary cross-entropy, mean squared error and Huber.
//
// A call is a few kernels. One grid-strides over the elements, writes the gradient and leaves its
// blocks' sums of the loss and of the accuracy's count in the backend's loss scratch; a block of
// one thread adds them to the sums in block order. The grid's size depends on the element count
// only, and each block reduces in a fixed tree, so the sums are the same bits on every run (an
// atomicAdd per element would not be). The pixel loss first weighs each sample's mask (one block a
// sample), since every pixel's gradient is divided by its sample's sum of weights; samples are
// taken kGroupSamples at a time, which the scratch holds.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "backends/cuda/detail/block_sums.cuh"
#include "backends/cuda/detail/check.hpp"
#include "backends/cuda/detail/cuda_backend_impl.hpp"
#include <cnnengine/base/error.hpp>
#include <cnnengine/base/task.hpp>

namespace cnn::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMostBlocks = 1024;   // of the element kernels' grid: the scratch holds a sum each
constexpr int kGroupSamples = 4096; // samples the pixel loss weighs at a time
constexpr unsigned long long kNoPixel = ~0ull;

struct LossScratch {
  double block_loss[kMostBlocks];
  double block_hits[kMostBlocks];
  double sample_weight[kGroupSamples];  // sum_p w[y_p] over the pixels not ignored
  double sample_pixels[kGroupSamples];  // the pixels not ignored
  // The first pixel (sample * pixels + pixel, in the group) whose mask value is no class; kNoPixel if none.
  unsigned long long first_bad;
};

// max(x, 0) + log(1 + exp(-|x|)) = log(1 + exp(x)), which overflows for no finite x.
__device__ float softplus(float x) { return fmaxf(x, 0.0f) + log1pf(expf(-fabsf(x))); }

__device__ float sigmoid(float x) {
  const float e = expf(-fabsf(x));
  return x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
}

// The elements' grid: enough blocks for one element a thread, at most kMostBlocks.
int element_blocks(std::size_t elements) {
  const std::size_t wanted = (elements + kThreads - 1) / kThreads;
  return static_cast<int>(wanted < 1 ? 1 : wanted > kMostBlocks ? kMostBlocks : wanted);
}

// Each sample's weight and pixels not ignored, one block a sample; the first mask value that is
// no class is kept (an integer minimum: the same whichever block comes first).
__global__ void __launch_bounds__(kThreads)
weigh_masks_kernel(const std::uint8_t* masks, std::size_t pixels, int classes, const float* weights,
                   LossScratch* scratch) {
  const std::size_t sample = blockIdx.x;
  const std::uint8_t* mask = masks + sample * pixels;
  double weight = 0.0, counted = 0.0;
  unsigned long long bad = kNoPixel;
  for (std::size_t p = threadIdx.x; p < pixels; p += kThreads) {
    const int y = mask[p];
    if (y == kIgnoreMask) continue;
    if (y >= classes) {
      if (bad == kNoPixel) bad = sample * pixels + p;  // a thread's pixels come in order
      continue;
    }
    weight += weights ? weights[y] : 1.0f;
    counted += 1.0;
  }
  if (bad != kNoPixel) atomicMin(&scratch->first_bad, bad);
  block_sums<kThreads>(weight, counted);
  if (threadIdx.x == 0) {
    scratch->sample_weight[sample] = weight;
    scratch->sample_pixels[sample] = counted;
  }
}

// One pixel a thread: its loss w[y] (-log p[y]) / W (W its sample's sum of weights), whether its
// largest logit (the first of equal ones) is its class, and its gradient w[y] / W (p - onehot)
// times the step's scale. A pixel ignored, or of a value that is no class, adds nothing and has
// gradient 0.
__global__ void __launch_bounds__(kThreads)
pixel_loss_kernel(const float* logits, const std::uint8_t* masks, std::size_t samples, std::size_t pixels,
                  int classes, const float* weights, float* dlogits, const StepScalars* step, LossScratch* scratch) {
  const float grad_scale = dlogits ? step->grad_scale : 0.0f;  // from device memory: a replay reads the current one
  double loss = 0.0, hits = 0.0;
  const std::size_t total = samples * pixels;
  for (std::size_t i = blockIdx.x * std::size_t{kThreads} + threadIdx.x; i < total;
       i += std::size_t{gridDim.x} * kThreads) {
    const std::size_t sample = i / pixels, pixel = i % pixels;
    const float* x = logits + sample * classes * pixels + pixel;  // class k at x[k * pixels]
    float best = x[0];
    int best_class = 0;
    for (int k = 1; k < classes; ++k) {
      const float v = x[k * pixels];
      if (v > best) {
        best = v;
        best_class = k;
      }
    }
    float sum = 0.0f;
    for (int k = 0; k < classes; ++k) sum += expf(x[k * pixels] - best);
    const int y = masks[i];
    const bool valid = y != kIgnoreMask && y < classes;
    const double total_weight = scratch->sample_weight[sample];
    const float w = valid ? (weights ? weights[y] : 1.0f) : 0.0f;
    if (valid) {
      if (total_weight > 0) loss += w * static_cast<double>(logf(sum) + best - x[y * pixels]) / total_weight;
      hits += best_class == y ? 1.0 : 0.0;
    }
    if (dlogits) {
      float* d = dlogits + sample * classes * pixels + pixel;
      const float coefficient = valid && total_weight > 0 ? static_cast<float>(w / total_weight) * grad_scale : 0.0f;
      for (int k = 0; k < classes; ++k)
        d[k * pixels] = valid ? coefficient * (expf(x[k * pixels] - best) / sum - (k == y ? 1.0f : 0.0f)) : 0.0f;
    }
  }
  block_sums<kThreads>(loss, hits);
  if (threadIdx.x == 0) {
    scratch->block_loss[blockIdx.x] = loss;
    scratch->block_hits[blockIdx.x] = hits;
  }
}

// Sigmoid cross-entropy, one label a thread: (p y softplus(-x) + (1 - y) softplus(x)) / K, and its
// gradient (sigmoid(x) (1 + (p - 1) y) - p y) / K times the step's scale.
__global__ void __launch_bounds__(kThreads)
sigmoid_loss_kernel(const float* logits, const float* targets, std::size_t total, std::size_t classes,
                    const float* positive_weights, float threshold_logit, float* dlogits, const StepScalars* step,
                    LossScratch* scratch) {
  const float grad_scale = dlogits ? step->grad_scale / static_cast<float>(classes) : 0.0f;
  double loss = 0.0, hits = 0.0;
  for (std::size_t i = blockIdx.x * std::size_t{kThreads} + threadIdx.x; i < total;
       i += std::size_t{gridDim.x} * kThreads) {
    const float x = logits[i], y = targets[i];
    const float p = positive_weights ? positive_weights[i % classes] : 1.0f;
    loss += static_cast<double>(p * y * softplus(-x) + (1.0f - y) * softplus(x));
    hits += (x > threshold_logit) == (y > 0.5f) ? 1.0 : 0.0;
    if (dlogits) dlogits[i] = (sigmoid(x) * (1.0f + (p - 1.0f) * y) - p * y) * grad_scale;
  }
  loss /= static_cast<double>(classes);
  block_sums<kThreads>(loss, hits);
  if (threadIdx.x == 0) {
    scratch->block_loss[blockIdx.x] = loss;
    scratch->block_hits[blockIdx.x] = hits;
  }
}

// Mean squared error or Huber, one value a thread, over T values a sample; the accuracy's count
// is the sum of |y - t|.
template <bool Huber>
__global__ void __launch_bounds__(kThreads)
regression_loss_kernel(const float* outputs, const float* targets, std::size_t total, std::size_t values, float delta,
                       float* doutputs, const StepScalars* step, LossScratch* scratch) {
  const float grad_scale = doutputs ? step->grad_scale / static_cast<float>(values) : 0.0f;
  double loss = 0.0, hits = 0.0;
  for (std::size_t i = blockIdx.x * std::size_t{kThreads} + threadIdx.x; i < total;
       i += std::size_t{gridDim.x} * kThreads) {
    const float d = outputs[i] - targets[i];
    const float a = fabsf(d);
    const bool quadratic = !Huber || a < delta;
    loss += static_cast<double>(Huber ? (quadratic ? 0.5f * d * d : delta * (a - 0.5f * delta)) : d * d);
    hits += static_cast<double>(a);
    if (doutputs) doutputs[i] = (Huber ? (quadratic ? d : copysignf(delta, d)) : 2.0f * d) * grad_scale;
  }
  loss /= static_cast<double>(values);
  block_sums<kThreads>(loss, hits);
  if (threadIdx.x == 0) {
    scratch->block_loss[blockIdx.x] = loss;
    scratch->block_hits[blockIdx.x] = hits;
  }
}

// Where a pixel loss's group of samples is, for the report of a mask value that is no class.
struct MaskGroup {
  const std::uint8_t* masks = nullptr;  // null: not a pixel loss
  std::size_t pixels = 0;
  int width = 1, classes = 0, first_sample = 0, samples = 0;
};

// One thread: adds the blocks' sums in block order to the call's sums, with `counted` (or, for
// the pixel loss, the samples' pixels not ignored), and reports the first mask value that is no
// class.
__global__ void add_block_sums_kernel(LossScratch* scratch, int blocks, double counted_values, MaskGroup group,
                                      float* loss_sum, float* correct, float* counted, volatile LabelError* error) {
  double loss = 0.0, hits = 0.0;
  for (int b = 0; b < blocks; ++b) {
    loss += scratch->block_loss[b];
    hits += scratch->block_hits[b];
  }
  double seen = counted_values;
  if (group.masks) {
    for (int s = 0; s < group.samples; ++s) seen += scratch->sample_pixels[s];
    const unsigned long long bad = scratch->first_bad;
    if (bad != kNoPixel && !error->raised) {
      const std::size_t pixel = bad % group.pixels;
      error->row = group.first_sample + static_cast<int>(bad / group.pixels);
      error->label = group.masks[bad];
      error->classes = group.classes;
      error->pixel_row = static_cast<int>(pixel / group.width);
      error->pixel_column = static_cast<int>(pixel % group.width);
      __threadfence_system();
      error->raised = 1;
    }
  }
  loss_sum[0] += static_cast<float>(loss);
  correct[0] += static_cast<float>(hits);
  counted[0] += static_cast<float>(seen);
}

bool absent(const Tensor& t) { return t.data == nullptr || t.elements() == 0; }

// A weights tensor, one weight a class (as the front checked): null for all 1.
const float* weights_of(const Tensor& weights) { return absent(weights) ? nullptr : weights.data; }

}  // namespace

std::size_t CudaBackend::loss_scratch_bytes() { return sizeof(LossScratch); }

std::size_t CudaBackend::do_loss_workspace_bytes(Task /*task*/, const Shape& /*output*/) { return 0; }

void CudaBackend::do_pixel_cross_entropy(const Tensor& logits, const ByteTensor& masks, const Tensor& class_weights,
                                         Tensor dlogits, const StepScalars* step, Tensor loss_sum, Tensor correct,
                                         Tensor counted, Workspace /*ws: the backend's own loss scratch instead*/) {
  activate();
  const std::size_t n = static_cast<std::size_t>(logits.n());
  const int classes = logits.c();
  const std::size_t pixels = static_cast<std::size_t>(logits.h()) * static_cast<std::size_t>(logits.w());
  const float* weights = weights_of(class_weights);
  if (n == 0 || pixels == 0) return;
  auto* scratch = static_cast<LossScratch*>(loss_scratch_);
  for (std::size_t first = 0; first < n; first += kGroupSamples) {
    const std::size_t samples = n - first < kGroupSamples ? n - first : kGroupSamples;
    const std::size_t sample_logits = static_cast<std::size_t>(classes) * pixels;
    const std::uint8_t* group_masks = masks.data + first * pixels;
    CNN_CHECK(cudaMemsetAsync(&scratch->first_bad, 0xff, sizeof scratch->first_bad, compute_));
    weigh_masks_kernel<<<static_cast<unsigned>(samples), kThreads, 0, compute_>>>(group_masks, pixels, classes,
                                                                                  weights, scratch);
    check_launch("weigh_masks_kernel");
    const int blocks = element_blocks(samples * pixels);
    pixel_loss_kernel<<<blocks, kThreads, 0, compute_>>>(
        logits.data + first * sample_logits, group_masks, samples, pixels, classes, weights,
        dlogits.empty() ? nullptr : dlogits.data + first * sample_logits, step, scratch);
    check_launch("pixel_loss_kernel");
    const MaskGroup group{group_masks, pixels, logits.w(), classes, static_cast<int>(first), static_cast<int>(samples)};
    add_block_sums_kernel<<<1, 1, 0, compute_>>>(scratch, blocks, 0.0, group, loss_sum.data, correct.data,
                                                 counted.data, label_error_device_);
    check_launch("add_block_sums_kernel");
  }
  touched(logits, DeviceRange{masks.data, masks.size}, class_weights, dlogits, loss_sum, correct, counted,
          scalars_range(step));
}

void CudaBackend::do_sigmoid_cross_entropy(const Tensor& logits, const Tensor& targets, const Tensor& positive_weights,
                                           float threshold_logit, Tensor dlogits, const StepScalars* step,
                                           Tensor loss_sum, Tensor correct, Tensor counted, Workspace /*ws*/) {
  activate();
  const std::size_t total = logits.elements();
  const std::size_t classes = logits.sample_elements();
  const float* pos_weight = weights_of(positive_weights);
  if (total == 0 || classes == 0) return;
  auto* scratch = static_cast<LossScratch*>(loss_scratch_);
  const int blocks = element_blocks(total);
  sigmoid_loss_kernel<<<blocks, kThreads, 0, compute_>>>(logits.data, targets.data, total, classes, pos_weight,
                                                         threshold_logit, dlogits.empty() ? nullptr : dlogits.data,
                                                         step, scratch);
  check_launch("sigmoid_loss_kernel");
  add_block_sums_kernel<<<1, 1, 0, compute_>>>(scratch, blocks, static_cast<double>(total), MaskGroup{},
                                               loss_sum.data, correct.data, counted.data, label_error_device_);
  check_launch("add_block_sums_kernel");
  touched(logits, targets, positive_weights, dlogits, loss_sum, correct, counted, scalars_range(step));
}

void CudaBackend::do_regression_loss(RegressionLoss kind, float delta, const Tensor& outputs, const Tensor& targets,
                                     Tensor doutputs, const StepScalars* step, Tensor loss_sum, Tensor correct,
                                     Tensor counted, Workspace /*ws*/) {
  activate();
  const std::size_t total = outputs.elements();
  const std::size_t values = outputs.sample_elements();
  const bool huber = kind == RegressionLoss::huber;
  if (total == 0 || values == 0) return;
  auto* scratch = static_cast<LossScratch*>(loss_scratch_);
  const int blocks = element_blocks(total);
  const auto kernel = huber ? regression_loss_kernel<true> : regression_loss_kernel<false>;
  kernel<<<blocks, kThreads, 0, compute_>>>(outputs.data, targets.data, total, values, delta,
                                            doutputs.empty() ? nullptr : doutputs.data, step, scratch);
  check_launch("regression_loss_kernel");
  add_block_sums_kernel<<<1, 1, 0, compute_>>>(scratch, blocks, static_cast<double>(total), MaskGroup{},
                                               loss_sum.data, correct.data, counted.data, label_error_device_);
  check_launch("add_block_sums_kernel");
  touched(outputs, targets, doutputs, loss_sum, correct, counted, scalars_range(step));
}

}  // namespace cnn::cuda
