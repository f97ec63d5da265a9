#include "cnnengine/backends/cpu/cpu_backend.hpp"

#include <omp.h>

#include <Eigen/Core>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "cnnengine/backends/cpu/detail/parallel.hpp"
#include "cnnengine/base/error.hpp"
#include "cnnengine/engine/detail/counter_rng.hpp"
#include "cnnengine/memory/host_resource.hpp"

namespace cnn {

using cpu::parallel_elements;

CpuBackend::CpuBackend(int threads) : threads_(threads > 0 ? threads : omp_get_num_procs()) {
  omp_set_dynamic(0);
  Eigen::setNbThreads(threads_);
}

namespace {
// Eigen's own list stops at "AVX" (it names neither AVX2 nor FMA), and the kernels' speed
// depends on them, so say what this library was compiled for.
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

std::string CpuBackend::description() const {
  return "cpu: Eigen " + std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) +
         "." + std::to_string(EIGEN_MINOR_VERSION) + " (" + Eigen::SimdInstructionSetsInUse() +
         compiled_vector_units() + "), " + std::to_string(threads_) + " thread" + (threads_ == 1 ? "" : "s");
}

memory::MemoryResource& CpuBackend::device_memory() { return memory::host_resource(); }
memory::MemoryResource& CpuBackend::staging_memory() { return memory::host_resource(); }

void CpuBackend::copy_to_device(const void* host, void* device, std::size_t bytes) {
  if (host != device) std::memcpy(device, host, bytes);
}
void CpuBackend::copy_to_host(const void* device, void* host, std::size_t bytes) {
  if (host != device) std::memcpy(host, device, bytes);
}

void CpuBackend::fill(Tensor t, float value) {
  parallel_elements(threads_, t.elements(), [&](std::size_t b, std::size_t e) {
    std::fill(t.data + b, t.data + e, value);
  });
}

void CpuBackend::relu_forward(const Tensor& x, Tensor y) {
  const float* in = x.data;
  float* out = y.data;
  parallel_elements(threads_, x.elements(), [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) out[i] = in[i] > 0.f ? in[i] : 0.f;
  });
}

void CpuBackend::relu_backward(const Tensor& y, const Tensor& dy, Tensor dx, bool accumulate) {
  const float* out = y.data;
  const float* g = dy.data;
  float* d = dx.data;
  parallel_elements(threads_, y.elements(), [&](std::size_t b, std::size_t e) {
    if (accumulate)
      for (std::size_t i = b; i < e; ++i) d[i] += out[i] > 0.f ? g[i] : 0.f;
    else
      for (std::size_t i = b; i < e; ++i) d[i] = out[i] > 0.f ? g[i] : 0.f;
  });
}

void CpuBackend::dropout_forward(const Tensor& x, Tensor y, Tensor mask, float p, const StepScalars* step,
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

void CpuBackend::dropout_backward(const Tensor& dy, const Tensor& mask, Tensor dx, bool accumulate) {
  parallel_elements(threads_, dy.elements(), [&](std::size_t b, std::size_t e) {
    if (accumulate)
      for (std::size_t i = b; i < e; ++i) dx.data[i] += dy.data[i] * mask.data[i];
    else
      for (std::size_t i = b; i < e; ++i) dx.data[i] = dy.data[i] * mask.data[i];
  });
}

void CpuBackend::add(const Tensor& a, const Tensor& b, Tensor y) {
  parallel_elements(threads_, a.elements(), [&](std::size_t lo, std::size_t hi) {
    for (std::size_t i = lo; i < hi; ++i) y.data[i] = a.data[i] + b.data[i];
  });
}

void CpuBackend::copy_or_add(const Tensor& src, Tensor dst, bool accumulate) {
  parallel_elements(threads_, src.elements(), [&](std::size_t lo, std::size_t hi) {
    if (accumulate)
      for (std::size_t i = lo; i < hi; ++i) dst.data[i] += src.data[i];
    else
      std::memcpy(dst.data + lo, src.data + lo, (hi - lo) * sizeof(float));
  });
}

void CpuBackend::softmax_cross_entropy(const Tensor& logits, const IntTensor& labels, Tensor dlogits,
                                       const StepScalars* step, Tensor loss_sum, Tensor correct) {
  if (!dlogits.empty() && !step) throw ConfigError("softmax_cross_entropy: a gradient needs the step scalars");
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
    loss += log_sum - static_cast<double>(z[label] - zmax);
    right += argmax == label;
    if (!dlogits.empty()) {
      float* d = dlogits.data + static_cast<std::size_t>(i) * classes;
      for (int k = 0; k < classes; ++k) {
        const double p = std::exp(static_cast<double>(z[k] - zmax) - log_sum);
        d[k] = static_cast<float>((p - (k == label ? 1.0 : 0.0)) * grad_scale);
      }
    }
  }
  loss_sum.data[0] += static_cast<float>(loss);
  correct.data[0] += static_cast<float>(right);
}

void CpuBackend::sgd_update(Tensor params, const Tensor& grads, Tensor velocity, const SgdConfig& c,
                            float lr) {
  parallel_elements(threads_, params.elements(), [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      float g = grads.data[i] + c.weight_decay * params.data[i];
      if (c.momentum != 0.f) {
        velocity.data[i] = c.momentum * velocity.data[i] + g;
        g = c.nesterov ? g + c.momentum * velocity.data[i] : velocity.data[i];
      }
      params.data[i] -= lr * g;
    }
  });
}

void CpuBackend::adamw_update(Tensor params, const Tensor& grads, Tensor m, Tensor v,
                              const AdamWConfig& c, float lr, long step) {
  const float correction1 = 1.0f - static_cast<float>(std::pow(c.beta1, static_cast<double>(step)));
  const float correction2 = 1.0f - static_cast<float>(std::pow(c.beta2, static_cast<double>(step)));
  const float step_size = lr / correction1;
  const float sqrt_correction2 = std::sqrt(correction2);
  const float decay = 1.0f - lr * c.weight_decay;
  parallel_elements(threads_, params.elements(), [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      const float g = grads.data[i];
      params.data[i] *= decay;
      m.data[i] = c.beta1 * m.data[i] + (1.0f - c.beta1) * g;
      v.data[i] = c.beta2 * v.data[i] + (1.0f - c.beta2) * g * g;
      const float denom = std::sqrt(v.data[i]) / sqrt_correction2 + c.epsilon;
      params.data[i] -= step_size * m.data[i] / denom;
    }
  });
}

}  // namespace cnn
