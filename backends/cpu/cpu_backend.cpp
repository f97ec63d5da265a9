#include "backends/cpu/cpu_backend.hpp"

#include <omp.h>

#include <Eigen/Core>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "backends/cpu/detail/adamw_span.hpp"
#include "backends/cpu/detail/available_host_memory.hpp"
#include "backends/cpu/detail/cpu_isa.hpp"
#include "backends/cpu/detail/gemm.hpp"
#include "backends/cpu/detail/gemm16.hpp"
#include "backends/cpu/detail/parallel.hpp"
#include <cnnengine/base/error.hpp>
#include <cnnengine/engine/core/backend.hpp>
#include "memory/host_resource.hpp"

namespace cnn {

using cpu::parallel_elements;

namespace {

int checked_threads(int threads) {
  constexpr int kMostThreads = 1024;
  if (threads > kMostThreads)
    throw ConfigError("the CPU backend takes at most " + std::to_string(kMostThreads) + " threads, not " +
                      std::to_string(threads));
  return threads > 0 ? threads : omp_get_num_procs();
}

Precision checked_precision(Precision precision) {
  return precision == Precision::tf32 ? Precision::fp32 : precision;  // TF32 is a GPU's tensor cores' format
}

}  // namespace

CpuBackend::CpuBackend(int threads, Precision precision)
    : threads_(checked_threads(threads)), precision_(checked_precision(precision)) {
  omp_set_dynamic(0);
  Eigen::setNbThreads(threads_);
  cpu::WorkPool::instance().reserve(threads_ - 1);  // the kernels' workers, started before any step
  cpu::isa();  // a CNN_CPU_ISA it cannot take is refused here, not inside a step
}

namespace {
// Eigen's own list stops at "AVX" (it names neither AVX2 nor FMA), so say what the element-wise
// code was compiled for, where it is more than the x86-64 baseline (CNN_NATIVE).
std::string compiled_vector_units() {
  std::string units;
#if defined(__AVX512F__)
  units += " AVX-512";
#endif
#if defined(__AVX2__)
  units += " AVX2";
#endif
#if defined(__FMA__)
  units += " FMA";
#endif
  return units.empty() ? "" : "; compiled for" + units;
}
}  // namespace

std::string CpuBackend::instruction_set() {
#if defined(__AVX512F__)
  return "avx512";
#elif defined(__AVX2__) && defined(__FMA__)
  return "avx2";
#else
  return "generic";
#endif
}

namespace {
std::string products_description(Precision precision) {
  if (precision == Precision::bf16)
    return std::string(", bf16 products ") +
           (cpu::bf16_tiles()          ? "on AMX's tiles"
            : cpu::bf16_instructions() ? "on AVX512-BF16"
                                       : "emulated, without AVX512-BF16: slower than fp32's (about 0.7 x), for the "
                                         "16-bit values' memory only");
  if (precision == Precision::fp16)
    return std::string(", fp16 products in float ") +
           (cpu::fp16_instructions() ? "on AVX-512"
                                     : "emulated, without AVX-512: slower than fp32's, for the 16-bit values' memory "
                                       "and a GPU's rounding only");
  return "";
}
}  // namespace

std::string CpuBackend::description() const {
  return "cpu: Eigen " + std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) + "." +
         std::to_string(EIGEN_MINOR_VERSION) + " (" + Eigen::SimdInstructionSetsInUse() + compiled_vector_units() +
         "), " + std::to_string(threads_) + " thread" + (threads_ == 1 ? "" : "s") + ", kernels on " +
         cpu::isa_name(cpu::isa()) + products_description(precision_);
}

// What a training step's convolutions reach through Eigen per thread (2 threads with AVX-512: 70
// GFLOP/s), what element-wise kernels stream from memory, which the threads share (2.2 GB/s), and a
// parallel region's start and end per call: measured on the machine of benchmarks/results.
ComputeRates CpuBackend::compute_rates() const {
  return {35e9 * threads_, 2.5e9, 5e-6};
}

memory::MemoryResource& CpuBackend::device_memory() { return memory::host_resource(); }
memory::MemoryResource& CpuBackend::staging_memory() { return memory::host_resource(); }

std::size_t CpuBackend::available_memory() const { return cpu::available_host_memory(); }

// No bytes may come with null pointers (an empty vector's data()), which memcpy may not be given.
void CpuBackend::copy_to_device(const void* host, void* device, std::size_t bytes) {
  if (bytes && host != device) std::memcpy(device, host, bytes);
}
void CpuBackend::copy_to_host(const void* device, void* host, std::size_t bytes) {
  if (bytes && host != device) std::memcpy(host, device, bytes);
}
void CpuBackend::do_copy_on_device(const void* src, void* dst, std::size_t bytes) {
  if (bytes && src != dst) std::memmove(dst, src, bytes);
}

void CpuBackend::do_fill(Tensor t, float value) {
  parallel_elements(threads_, t.elements(), [&](std::size_t b, std::size_t e) {
    std::fill(t.data + b, t.data + e, value);
  });
}

void CpuBackend::do_relu_forward(const Tensor& x, Tensor y) {
  const float* in = x.data;
  float* out = y.data;
  parallel_elements(threads_, x.elements(), [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) out[i] = in[i] > 0.f ? in[i] : 0.f;
  });
}

void CpuBackend::do_relu_backward(const Tensor& y, const Tensor& dy, Tensor dx, bool accumulate) {
  const float* out = y.data;
  const float* g = dy.data;
  float* d = dx.data;
  parallel_elements(threads_, y.elements(), [=](std::size_t b, std::size_t e) {  // by value: the loops vectorize
    if (accumulate)
      for (std::size_t i = b; i < e; ++i) {
        const float gi = g[i];  // read unconditionally: the select then vectorizes
        d[i] += out[i] > 0.f ? gi : 0.f;
      }
    else
      for (std::size_t i = b; i < e; ++i) {
        const float gi = g[i];
        d[i] = out[i] > 0.f ? gi : 0.f;
      }
  });
}

void CpuBackend::do_dropout_forward(const Tensor& x, Tensor y, Tensor mask, float p, const StepScalars* step,
                                    std::uint64_t layer) {
  const float scale = 1.0f / (1.0f - p);
  const std::uint64_t seed = splitmix64(step->seed ^ layer);
  const std::uint64_t first_index = step->first_sample * x.sample_elements();
  parallel_elements(threads_, x.elements(), [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      mask.data[i] = dropout_keep(seed, first_index + i, p) ? scale : 0.f;
      y.data[i] = x.data[i] * mask.data[i];
    }
  });
}

void CpuBackend::do_dropout_backward(const Tensor& dy, const Tensor& mask, Tensor dx, bool accumulate) {
  parallel_elements(threads_, dy.elements(), [&](std::size_t b, std::size_t e) {
    if (accumulate)
      for (std::size_t i = b; i < e; ++i) dx.data[i] += dy.data[i] * mask.data[i];
    else
      for (std::size_t i = b; i < e; ++i) dx.data[i] = dy.data[i] * mask.data[i];
  });
}

void CpuBackend::do_add(const Tensor& a, const Tensor& b, Tensor y) {
  parallel_elements(threads_, a.elements(), [&](std::size_t lo, std::size_t hi) {
    for (std::size_t i = lo; i < hi; ++i) y.data[i] = a.data[i] + b.data[i];
  });
}

void CpuBackend::do_copy_or_add(const Tensor& src, Tensor dst, bool accumulate) {
  parallel_elements(threads_, src.elements(), [&](std::size_t lo, std::size_t hi) {
    if (accumulate)
      for (std::size_t i = lo; i < hi; ++i) dst.data[i] += src.data[i];
    else
      std::memcpy(dst.data + lo, src.data + lo, (hi - lo) * sizeof(float));
  });
}

void CpuBackend::do_softmax_cross_entropy(const Tensor& logits, const IntTensor& labels, float label_smoothing,
                                          Tensor dlogits, const StepScalars* step, Tensor loss_sum, Tensor correct) {
  // Smoothing takes branches of its own: without it the arithmetic is the plain loss's, to the bit.
  const bool smoothed = label_smoothing != 0.0f;
  const double smoothing = label_smoothing;
  const cpu::FlushSubnormals flush;  // a sure prediction's probabilities fall below 2^-126
  const double grad_scale = dlogits.empty() ? 0.0 : step->grad_scale;
  const int n = logits.n();
  const int classes = static_cast<int>(logits.sample_elements());
  double loss = 0.0;
  int right = 0;
  for (int i = 0; i < n; ++i) {
    const int label = labels.data[i];
    if (label < 0 || label >= classes)
      throw DataError("label " + std::to_string(label) + " of sample " + std::to_string(i) +
                      " is outside the " + std::to_string(classes) + " classes of the network");
    const float* z = logits.data + static_cast<std::size_t>(i) * classes;
    int argmax = 0;
    for (int k = 1; k < classes; ++k)
      if (z[k] > z[argmax]) argmax = k;
    const float zmax = z[argmax];
    double sum = 0.0;
    for (int k = 0; k < classes; ++k) sum += std::exp(static_cast<double>(z[k] - zmax));
    const double log_sum = std::log(sum);
    if (smoothed) {
      double mean = 0.0;  // of z - zmax over the classes
      for (int k = 0; k < classes; ++k) mean += static_cast<double>(z[k] - zmax);
      mean /= classes;
      loss += (1.0 - smoothing) * (log_sum - static_cast<double>(z[label] - zmax)) + smoothing * (log_sum - mean);
    } else {
      loss += log_sum - static_cast<double>(z[label] - zmax);
    }
    right += argmax == label;
    if (!dlogits.empty()) {
      float* d = dlogits.data + static_cast<std::size_t>(i) * classes;
      for (int k = 0; k < classes; ++k) {
        const double p = std::exp(static_cast<double>(z[k] - zmax) - log_sum);
        if (smoothed)
          d[k] = static_cast<float>((p - (k == label ? 1.0 - smoothing : 0.0) - smoothing / classes) * grad_scale);
        else
          d[k] = static_cast<float>((p - (k == label ? 1.0 : 0.0)) * grad_scale);
      }
    }
  }
  loss_sum.data[0] += static_cast<float>(loss);
  correct.data[0] += static_cast<float>(right);
}

// The optimizer updates read every pointer and setting into locals first. Through the Tensor and
// config references the compiler must assume that a store to params could change them: it
// reloaded them for every element and left the loops scalar (AdamW's square root and division
// one element at a time, 1.1 ms of a 421,642-parameter update where the vector loop takes 0.12).
// The statements are those of the scalar loops, so the results are the same bits: params is
// still stored after the decay and read back, which keeps the decay's product rounded on its own
// (PyTorch's mul_ then addcdiv_) instead of fused into the subtraction.
void CpuBackend::do_sgd_update(Tensor params, const Tensor& grads, Tensor velocity, const SgdConfig& c,
                               float lr, const float* guard) {
  if (guard && !std::isfinite(*guard)) return;
  float* p = params.data;
  const float* grad = grads.data;
  float* vel = velocity.data;
  const float weight_decay = c.weight_decay, momentum = c.momentum;
  const bool nesterov = c.nesterov;
  parallel_elements(threads_, params.elements(), [=](std::size_t b, std::size_t e) {
    if (momentum == 0.f) {
      for (std::size_t i = b; i < e; ++i) p[i] -= lr * (grad[i] + weight_decay * p[i]);
    } else if (nesterov) {
      for (std::size_t i = b; i < e; ++i) {
        const float param = p[i];
        const float g = grad[i] + weight_decay * param;
        const float moved = momentum * vel[i] + g;
        const float ahead = g + momentum * moved;
        vel[i] = moved;
        p[i] = param - lr * ahead;
      }
    } else {
      for (std::size_t i = b; i < e; ++i) {
        const float param = p[i];
        const float moved = momentum * vel[i] + (grad[i] + weight_decay * param);
        vel[i] = moved;
        p[i] = param - lr * moved;
      }
    }
  });
}

void CpuBackend::do_unscale_gradients(Tensor grads, float inverse_scale, Tensor found) {
  float* g = grads.data;
  std::atomic<bool> not_finite{false};
  parallel_elements(threads_, grads.elements(), [=, &not_finite](std::size_t b, std::size_t e) {
    bool all_finite = true;
    for (std::size_t i = b; i < e; ++i) {
      all_finite &= std::isfinite(g[i]);
      g[i] *= inverse_scale;
    }
    if (!all_finite) not_finite = true;
  });
  if (not_finite) found.data[0] = 1.0f;
}

void CpuBackend::do_adamw_update(Tensor params, const Tensor& grads, Tensor m, Tensor v,
                                 const AdamWConfig& c, float lr, long step, const float* guard) {
  if (guard && !std::isfinite(*guard)) return;
  const float correction1 = 1.0f - static_cast<float>(std::pow(c.beta1, static_cast<double>(step)));
  const float correction2 = 1.0f - static_cast<float>(std::pow(c.beta2, static_cast<double>(step)));
  const cpu::AdamWStep constants{1.0f - lr * c.weight_decay, c.beta1,          c.beta2,
                                 c.epsilon,                  lr / correction1, std::sqrt(correction2)};
  float *p = params.data, *m1 = m.data, *m2 = v.data;
  const float* grad = grads.data;
  parallel_elements(threads_, params.elements(), [=](std::size_t b, std::size_t e) {
    cpu::adamw_span(constants, p, grad, m1, m2, b, e);
  });
}

}  // namespace cnn
