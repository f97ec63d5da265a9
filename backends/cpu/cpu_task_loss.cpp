// The CPU backend's losses of the tasks beyond classification (base/task.hpp gives their
// definitions): per-pixel softmax cross-entropy, sigmoid binary cross-entropy, mean squared error
// and Huber. Each element is computed in double; each work item (a sample, or a run of a sample's
// pixels) sums its own elements in order and the items' sums are added in item order, so the
// results are the same bits whatever the thread count. The items' sums live in the caller's
// workspace (loss_workspace_bytes), so that a call allocates nothing.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/detail/every_micro_batch.hpp"
#include "backends/cpu/detail/parallel.hpp"
#include <cnnengine/base/error.hpp>
#include <cnnengine/base/task.hpp>

namespace cnn {
namespace {

// Runs item(i) for every i in [0, items), in parallel where the `elements` they cover pay for
// waking threads.
template <class Fn>
void for_each_item(int threads, std::size_t items, std::size_t elements, Fn&& item) {
  constexpr std::size_t kMinElementsPerThread = 1 << 14;
  const int useful = static_cast<int>(
      std::min<std::size_t>(static_cast<std::size_t>(std::max(threads, 1)), elements / kMinElementsPerThread + 1));
  cpu::parallel_ranges(useful, items, [&](int, std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) item(i);
  });
}

bool absent(const Tensor& t) { return t.data == nullptr || t.elements() == 0; }

// A weights tensor, one weight a class (as the front checked): null for all 1.
const float* weights_of(const Tensor& weights) { return absent(weights) ? nullptr : weights.data; }

// max(x, 0) + log(1 + exp(-|x|)) = log(1 + exp(x)), which overflows for no finite x.
double softplus(double x) { return std::max(x, 0.0) + std::log1p(std::exp(-std::abs(x))); }

double sigmoid(double x) {
  const double e = std::exp(-std::abs(x));
  return x >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}

// Pixels a work item of the pixel loss takes: its logits of every class stay in cache between
// the passes over them.
constexpr std::size_t kPixelsPerItem = 256;

struct PixelItem {
  double weight = 0, loss = 0;  // sum_p w[y_p], sum_p w[y_p] (-log p_p[y_p])
  std::size_t counted = 0, right = 0;
  std::size_t first_bad = SIZE_MAX;  // the first pixel whose mask value is no class, within the sample
};

// One sample's share of a loss over [N, K] outputs: its loss, and what it adds to `correct`.
struct SampleSums {
  double loss = 0, hits = 0;
};

std::size_t count_of(int dimension) { return static_cast<std::size_t>(std::max(dimension, 0)); }

// How the pixel loss splits an output of `shape` ([N, K, H, W]) into work items.
struct PixelItems {
  std::size_t samples = 0, pixels = 0, per_sample = 0;
  explicit PixelItems(const Shape& shape) {
    const Tensor view{nullptr, shape};
    samples = count_of(view.n());
    pixels = count_of(view.h()) * count_of(view.w());
    per_sample = (pixels + kPixelsPerItem - 1) / kPixelsPerItem;
  }
  std::size_t items() const { return samples * per_sample; }
  // The workspace: the items' sums, then each sample's sum of weights.
  std::size_t workspace_bytes() const { return items() * sizeof(PixelItem) + samples * sizeof(double); }
};
static_assert(sizeof(PixelItem) % alignof(double) == 0, "the samples' weights follow the items");

// The workspace of the losses over [N, K] outputs: a sample's sums each.
std::size_t sample_sums_bytes(const Shape& shape) { return count_of(Tensor{nullptr, shape}.n()) * sizeof(SampleSums); }

// The start of `ws`, which must hold `needed` bytes aligned for T.
template <class T>
T* workspace_of(const char* call, const Workspace& ws, std::size_t needed) {
  if (ws.bytes < needed)
    throw std::logic_error(std::string(call) + ": workspace of " + std::to_string(ws.bytes) + " bytes, " +
                           std::to_string(needed) + " needed");
  if (needed && reinterpret_cast<std::uintptr_t>(ws.data) % alignof(T) != 0)
    throw std::logic_error(std::string(call) + ": workspace not aligned to " + std::to_string(alignof(T)) +
                           " bytes");
  return static_cast<T*>(ws.data);
}

}  // namespace

std::size_t CpuBackend::do_loss_workspace_bytes(Task task, const Shape& output) {
  return cpu::most_over_micro_batches(output[0],
                                      [&](int n) { return loss_workspace_at(task, cpu::at_batch(output, n)); });
}

std::size_t CpuBackend::loss_workspace_at(Task task, const Shape& output) const {
  switch (task) {
    case Task::segment: return PixelItems(output).workspace_bytes();
    case Task::multilabel:
    case Task::regress: return sample_sums_bytes(output);
    case Task::classify: break;
  }
  return 0;
}

void CpuBackend::do_pixel_cross_entropy(const Tensor& logits, const ByteTensor& masks, const Tensor& class_weights,
                                        Tensor dlogits, const StepScalars* step, Tensor loss_sum, Tensor correct,
                                        Tensor counted, Workspace ws) {
  const char* const call = "pixel_cross_entropy";
  const std::size_t n = static_cast<std::size_t>(logits.n());
  const int classes = logits.c();
  const std::size_t pixels = static_cast<std::size_t>(logits.h()) * static_cast<std::size_t>(logits.w());
  const float* weights = weights_of(class_weights);
  const PixelItems layout(logits.shape);
  PixelItem* const items = workspace_of<PixelItem>(call, ws, layout.workspace_bytes());
  if (n == 0 || pixels == 0) return;

  const std::size_t items_per_sample = layout.per_sample, item_count = layout.items();
  std::uninitialized_value_construct_n(items, item_count);
  double* const sample_weight = reinterpret_cast<double*>(items + item_count);
  std::uninitialized_fill_n(sample_weight, n, 0.0);
  const auto item_pixels = [&](std::size_t item, std::size_t& sample, std::size_t& begin, std::size_t& end) {
    sample = item / items_per_sample;
    begin = item % items_per_sample * kPixelsPerItem;
    end = std::min(begin + kPixelsPerItem, pixels);
  };

  // First the masks: their values checked, each sample's sum of weights, before anything is written.
  for_each_item(threads_, item_count, masks.size, [&](std::size_t item) {
    std::size_t sample, begin, end;
    item_pixels(item, sample, begin, end);
    PixelItem& sums = items[item];
    const std::uint8_t* mask = masks.data + sample * pixels;
    for (std::size_t p = begin; p < end; ++p) {
      const int y = mask[p];
      if (y == kIgnoreMask) continue;
      if (y >= classes) {
        sums.first_bad = std::min(sums.first_bad, p);
        continue;
      }
      sums.weight += weights ? weights[y] : 1.0;
      ++sums.counted;
    }
  });
  for (std::size_t item = 0; item < item_count; ++item) {
    const std::size_t sample = item / items_per_sample;
    if (const std::size_t p = items[item].first_bad; p != SIZE_MAX) {
      const std::size_t width = static_cast<std::size_t>(logits.w());
      throw DataError(std::string(call) + ": mask value " + std::to_string(masks.data[sample * pixels + p]) +
                      " at pixel (" + std::to_string(p / width) + ", " + std::to_string(p % width) + ") of sample " +
                      std::to_string(sample) + " is neither one of the " + std::to_string(classes) +
                      " classes nor " + std::to_string(kIgnoreMask) + " (ignored)");
    }
    sample_weight[sample] += items[item].weight;
  }

  const double grad_scale = dlogits.empty() ? 0.0 : step->grad_scale;
  for_each_item(threads_, item_count, logits.elements(), [&](std::size_t item) {
    std::size_t sample, begin, end;
    item_pixels(item, sample, begin, end);
    const std::size_t count = end - begin;
    const float* z = logits.data + sample * static_cast<std::size_t>(classes) * pixels + begin;  // class 0's
    const std::uint8_t* mask = masks.data + sample * pixels + begin;
    float zmax[kPixelsPerItem];
    int argmax[kPixelsPerItem];
    double sum[kPixelsPerItem];
    // Class by class over the pixels: each class's logits are contiguous.
    for (std::size_t i = 0; i < count; ++i) {
      zmax[i] = z[i];
      argmax[i] = 0;
      sum[i] = 0.0;
    }
    for (int k = 1; k < classes; ++k) {
      const float* zk = z + static_cast<std::size_t>(k) * pixels;
      for (std::size_t i = 0; i < count; ++i)
        if (zk[i] > zmax[i]) {
          zmax[i] = zk[i];
          argmax[i] = k;
        }
    }
    for (int k = 0; k < classes; ++k) {
      const float* zk = z + static_cast<std::size_t>(k) * pixels;
      for (std::size_t i = 0; i < count; ++i) sum[i] += std::exp(static_cast<double>(zk[i] - zmax[i]));
    }
    PixelItem& sums = items[item];
    const double total_weight = sample_weight[sample];
    double coefficient[kPixelsPerItem];  // of the pixel's gradient: w[y] / W * grad_scale; 0 ignored
    for (std::size_t i = 0; i < count; ++i) {
      coefficient[i] = 0.0;
      const int y = mask[i];
      if (y == kIgnoreMask) continue;
      const double w = weights ? weights[y] : 1.0;
      const float zy = z[static_cast<std::size_t>(y) * pixels + i];
      sums.loss += w * (std::log(sum[i]) - static_cast<double>(zy - zmax[i]));
      sums.right += argmax[i] == y;
      if (total_weight > 0) coefficient[i] = w / total_weight * grad_scale;
    }
    if (dlogits.empty()) return;
    float* d = dlogits.data + sample * static_cast<std::size_t>(classes) * pixels + begin;
    for (int k = 0; k < classes; ++k) {
      const float* zk = z + static_cast<std::size_t>(k) * pixels;
      float* dk = d + static_cast<std::size_t>(k) * pixels;
      for (std::size_t i = 0; i < count; ++i) {
        if (mask[i] == kIgnoreMask) {
          dk[i] = 0.0f;
          continue;
        }
        const double p = std::exp(static_cast<double>(zk[i] - zmax[i])) / sum[i];
        dk[i] = static_cast<float>(coefficient[i] * (p - (k == mask[i] ? 1.0 : 0.0)));
      }
    }
  });

  double loss = 0.0;
  std::size_t right = 0, seen = 0;
  for (std::size_t sample = 0; sample < n; ++sample) {
    double sample_loss = 0.0;
    for (std::size_t i = 0; i < items_per_sample; ++i) {
      const PixelItem& sums = items[sample * items_per_sample + i];
      sample_loss += sums.loss;
      right += sums.right;
      seen += sums.counted;
    }
    if (sample_weight[sample] > 0) loss += sample_loss / sample_weight[sample];
  }
  loss_sum.data[0] += static_cast<float>(loss);
  correct.data[0] += static_cast<float>(right);
  counted.data[0] += static_cast<float>(seen);
}

namespace {

// Runs sample(i, sums) for every sample in parallel, the sums in `scratch` (n of them), and adds
// the samples' sums in order.
template <class Fn>
void add_sample_sums(int threads, std::size_t n, std::size_t per_sample, double counted_values, Tensor loss_sum,
                     Tensor correct, Tensor counted, SampleSums* scratch, Fn&& sample) {
  std::uninitialized_value_construct_n(scratch, n);
  for_each_item(threads, n, n * per_sample, [&](std::size_t i) { sample(i, scratch[i]); });
  double loss = 0.0, hits = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    loss += scratch[i].loss;
    hits += scratch[i].hits;
  }
  loss_sum.data[0] += static_cast<float>(loss);
  correct.data[0] += static_cast<float>(hits);
  counted.data[0] += static_cast<float>(counted_values);
}

}  // namespace

void CpuBackend::do_sigmoid_cross_entropy(const Tensor& logits, const Tensor& targets, const Tensor& positive_weights,
                                          float threshold_logit, Tensor dlogits, const StepScalars* step,
                                          Tensor loss_sum, Tensor correct, Tensor counted, Workspace ws) {
  const char* const call = "sigmoid_cross_entropy";
  const std::size_t n = static_cast<std::size_t>(logits.n());
  const std::size_t classes = logits.sample_elements();
  const float* pos_weight = weights_of(positive_weights);
  SampleSums* const scratch = workspace_of<SampleSums>(call, ws, sample_sums_bytes(logits.shape));
  if (n == 0 || classes == 0) return;
  const double grad_scale = dlogits.empty() ? 0.0 : step->grad_scale / static_cast<double>(classes);
  add_sample_sums(threads_, n, classes, static_cast<double>(n * classes), loss_sum, correct, counted, scratch,
                  [&](std::size_t i, SampleSums& sums) {
                    const float* x = logits.data + i * classes;
                    const float* y = targets.data + i * classes;
                    double loss = 0.0;
                    for (std::size_t k = 0; k < classes; ++k) {
                      const double xk = x[k], yk = y[k], pk = pos_weight ? pos_weight[k] : 1.0;
                      // -(p y log sigmoid(x) + (1 - y) log(1 - sigmoid(x))), each log a softplus
                      loss += pk * yk * softplus(-xk) + (1.0 - yk) * softplus(xk);
                      sums.hits += (x[k] > threshold_logit) == (y[k] > 0.5f);
                      if (!dlogits.empty())
                        dlogits.data[i * classes + k] =
                            static_cast<float>((sigmoid(xk) * (1.0 + (pk - 1.0) * yk) - pk * yk) * grad_scale);
                    }
                    sums.loss = loss / static_cast<double>(classes);
                  });
}

void CpuBackend::do_regression_loss(RegressionLoss kind, float delta, const Tensor& outputs, const Tensor& targets,
                                    Tensor doutputs, const StepScalars* step, Tensor loss_sum, Tensor correct,
                                    Tensor counted, Workspace ws) {
  const char* const call = "regression_loss";
  const std::size_t n = static_cast<std::size_t>(outputs.n());
  const std::size_t values = outputs.sample_elements();
  const bool huber = kind == RegressionLoss::huber;
  SampleSums* const scratch = workspace_of<SampleSums>(call, ws, sample_sums_bytes(outputs.shape));
  if (n == 0 || values == 0) return;
  const double grad_scale = doutputs.empty() ? 0.0 : step->grad_scale / static_cast<double>(values);
  const double h = delta;
  add_sample_sums(threads_, n, values, static_cast<double>(n * values), loss_sum, correct, counted, scratch,
                  [&](std::size_t i, SampleSums& sums) {
                    const float* y = outputs.data + i * values;
                    const float* t = targets.data + i * values;
                    double loss = 0.0;
                    for (std::size_t k = 0; k < values; ++k) {
                      const double d = static_cast<double>(y[k]) - t[k];
                      const bool quadratic = !huber || std::abs(d) < h;
                      loss += huber ? (quadratic ? 0.5 * d * d : h * (std::abs(d) - 0.5 * h)) : d * d;
                      sums.hits += std::abs(d);
                      if (!doutputs.empty()) {
                        const double slope = huber ? (quadratic ? d : std::copysign(h, d)) : 2.0 * d;
                        doutputs.data[i * values + k] = static_cast<float>(slope * grad_scale);
                      }
                    }
                    sums.loss = loss / static_cast<double>(values);
                  });
}

}  // namespace cnn
