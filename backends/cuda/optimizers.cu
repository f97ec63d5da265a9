// Fused optimizer updates over the flat parameter block: one launch, one pass over memory.
// The formulas are PyTorch's (torch.optim.SGD and torch.optim.AdamW), so runs compare.
#include <cmath>
#include <stdexcept>
#include <string>

#include "backends/cuda/detail/check.hpp"
#include "backends/cuda/detail/cuda_backend_impl.hpp"
#include "backends/cuda/detail/grid_stride.cuh"
#include <cnnengine/base/error.hpp>

namespace cnn::cuda {
namespace {

// `guard`: the step's loss sum, read by every thread (one cached load); not finite, nothing moves.
__device__ bool skipped(const float* guard) { return guard && !isfinite(*guard); }

__global__ void sgd_kernel(float* params, const float* grads, float* velocity, std::size_t n, float lr,
                           float momentum, bool nesterov, float weight_decay, const float* guard) {
  if (skipped(guard)) return;
  CNN_FOR_EACH_ELEMENT(i, n) {
    float g = grads[i];
    if (weight_decay != 0.0f) g += weight_decay * params[i];
    if (momentum != 0.0f) {
      // With the velocity starting at zero the first step gives v = g, as PyTorch's buffer does.
      const float v = momentum * velocity[i] + g;
      velocity[i] = v;
      g = nesterov ? g + momentum * v : v;
    }
    params[i] -= lr * g;
  }
}

__global__ void adamw_kernel(float* params, const float* grads, float* m, float* v, std::size_t n, float lr,
                             float beta1, float beta2, float epsilon, float weight_decay, float step_size,
                             float bias_correction2_sqrt, const float* guard) {
  if (skipped(guard)) return;
  CNN_FOR_EACH_ELEMENT(i, n) {
    const float g = grads[i];
    const float p = params[i] * (1.0f - lr * weight_decay);
    const float m_i = m[i] + (1.0f - beta1) * (g - m[i]);  // PyTorch's lerp
    const float v_i = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = m_i;
    v[i] = v_i;
    params[i] = p - step_size * m_i / (sqrtf(v_i) / bias_correction2_sqrt + epsilon);
  }
}

__global__ void unscale_kernel(float* grads, std::size_t n, float inverse_scale, float* found) {
  CNN_FOR_EACH_ELEMENT(i, n) {
    const float g = grads[i];
    if (!isfinite(g)) *found = 1.0f;  // every thread that writes writes the same
    grads[i] = g * inverse_scale;
  }
}

void same_size(const char* call, const Tensor& params, const Tensor& other) {
  if (other.elements() != params.elements()) {
    throw ShapeError(std::string(call) + ": a state or gradient block of " +
                     std::to_string(other.elements()) + " values for " +
                     std::to_string(params.elements()) + " parameters");
  }
}

}  // namespace

void CudaBackend::do_sgd_update(Tensor params, const Tensor& grads, Tensor velocity, const SgdConfig& config,
                                float learning_rate, const float* guard) {
  activate();
  same_size("sgd_update", params, grads);
  if (config.momentum != 0.0f) same_size("sgd_update", params, velocity);
  const std::size_t n = params.elements();
  if (n == 0) return;
  sgd_kernel<<<blocks_for(n), 256, 0, compute_>>>(params.data, grads.data, velocity.data, n, learning_rate,
                                                  config.momentum, config.nesterov, config.weight_decay, guard);
  check_launch("sgd_kernel");
  touched(params, grads, velocity, DeviceRange{guard, guard ? sizeof(float) : 0});
}

void CudaBackend::do_unscale_gradients(Tensor grads, float inverse_scale, Tensor found) {
  activate();
  const std::size_t n = grads.elements();
  if (n == 0) return;
  unscale_kernel<<<blocks_for(n), 256, 0, compute_>>>(grads.data, n, inverse_scale, found.data);
  check_launch("unscale_kernel");
  touched(grads, found);
}

void CudaBackend::do_adamw_update(Tensor params, const Tensor& grads, Tensor m, Tensor v,
                                  const AdamWConfig& config, float learning_rate, long step, const float* guard) {
  activate();
  if (step < 1) throw ConfigError("adamw_update: step " + std::to_string(step) + " (steps count from 1)");
  same_size("adamw_update", params, grads);
  same_size("adamw_update", params, m);
  same_size("adamw_update", params, v);
  const std::size_t n = params.elements();
  if (n == 0) return;
  const double bias_correction1 = 1.0 - std::pow(static_cast<double>(config.beta1), static_cast<double>(step));
  const double bias_correction2 = 1.0 - std::pow(static_cast<double>(config.beta2), static_cast<double>(step));
  const float step_size = static_cast<float>(learning_rate / bias_correction1);
  const float bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  adamw_kernel<<<blocks_for(n), 256, 0, compute_>>>(params.data, grads.data, m.data, v.data, n, learning_rate,
                                                    config.beta1, config.beta2, config.epsilon,
                                                    config.weight_decay, step_size, bias_correction2_sqrt, guard);
  check_launch("adamw_kernel");
  touched(params, grads, m, v, DeviceRange{guard, guard ? sizeof(float) : 0});
}

}  // namespace cnn::cuda
