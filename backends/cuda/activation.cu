// The activations besides ReLU on the GPU (ActivationDesc): one grid-striding kernel per
// direction, templated on the formula. The formulas are the CPU backend's
// (backends/cpu/cpu_activation.cpp) with CUDA's accurate expf, tanhf and erff, not the fast-math
// intrinsics, so both backends agree to a few ulp. In place works: each thread reads its element
// before writing it.
#include <cstddef>
#include <stdexcept>
#include <string>

#include "backends/cuda/detail/check.hpp"
#include "backends/cuda/detail/cuda_backend_impl.hpp"
#include "backends/cuda/detail/grid_stride.cuh"
#include <cnnengine/base/error.hpp>
#include <cnnengine/engine/core/backend.hpp>

namespace cnn::cuda {
namespace {

constexpr float kSqrtHalf = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;

// 1 / (1 + exp(-x)) from exp(-|x|), which never overflows.
__device__ __forceinline__ float sigmoid(float x) {
  const float e = expf(-fabsf(x));
  const float r = 1.0f / (1.0f + e);
  return x < 0.0f ? e * r : r;
}

// Forward formulas: y = f(x).
struct LeakyReluForward {
  float slope;
  __device__ float operator()(float x) const { return x > 0.0f ? x : x * slope; }
};
struct Relu6Forward {
  __device__ float operator()(float x) const { return fminf(fmaxf(x, 0.0f), 6.0f); }
};
struct SigmoidForward {
  __device__ float operator()(float x) const { return sigmoid(x); }
};
struct TanhForward {
  __device__ float operator()(float x) const { return tanhf(x); }
};
struct SiluForward {
  __device__ float operator()(float x) const { return x * sigmoid(x); }
};
struct GeluForward {
  __device__ float operator()(float x) const { return x * 0.5f * (1.0f + erff(x * kSqrtHalf)); }
};
struct HardswishForward {
  __device__ float operator()(float x) const { return x * fminf(fmaxf(x + 3.0f, 0.0f), 6.0f) / 6.0f; }
};
struct HardsigmoidForward {
  __device__ float operator()(float x) const { return fminf(fmaxf(x + 3.0f, 0.0f), 6.0f) / 6.0f; }
};

// Backward formulas: dx = g(v, dy), v the output where derivative_from_output, else the input.
struct LeakyReluBackward {
  float slope;
  __device__ float operator()(float v, float g) const { return v > 0.0f ? g : g * slope; }
};
struct Relu6Backward {
  __device__ float operator()(float y, float g) const { return y > 0.0f && y < 6.0f ? g : 0.0f; }
};
struct SigmoidBackward {
  __device__ float operator()(float y, float g) const { return g * (1.0f - y) * y; }
};
struct TanhBackward {
  __device__ float operator()(float y, float g) const { return g * (1.0f - y * y); }
};
struct SiluBackward {
  __device__ float operator()(float x, float g) const {
    const float s = sigmoid(x);
    return g * s * (1.0f + x * (1.0f - s));
  }
};
struct GeluBackward {
  __device__ float operator()(float x, float g) const {
    const float cdf = 0.5f * (1.0f + erff(x * kSqrtHalf));
    const float pdf = kInvSqrt2Pi * expf(x * x * -0.5f);
    return g * fmaf(x, pdf, cdf);
  }
};
struct HardswishBackward {
  __device__ float operator()(float x, float g) const {
    return x < -3.0f ? 0.0f : x <= 3.0f ? g * (x / 3.0f + 0.5f) : g;
  }
};
struct HardsigmoidBackward {
  __device__ float operator()(float y, float g) const { return y > 0.0f && y < 1.0f ? g * (1.0f / 6.0f) : 0.0f; }
};

template <class F>
__global__ void activation_forward_kernel(const float* x, float* y, std::size_t n, F f) {
  CNN_FOR_EACH_ELEMENT(i, n) y[i] = f(x[i]);
}

template <bool Accumulate, class F>
__global__ void activation_backward_kernel(const float* v, const float* dy, float* dx, std::size_t n, F f) {
  CNN_FOR_EACH_ELEMENT(i, n) {
    const float g = f(v[i], dy[i]);
    dx[i] = Accumulate ? __fadd_rn(dx[i], g) : g;  // never fused with f's last multiply, as on the CPU
  }
}

}  // namespace

void CudaBackend::do_activation_forward(const ActivationDesc& desc, const Tensor& x, Tensor y) {
  activate();
  const std::size_t n = x.elements();
  if (n == 0) return;
  auto launch = [&](auto f) {
    activation_forward_kernel<<<blocks_for(n), 256, 0, compute_>>>(x.data, y.data, n, f);
  };
  switch (desc.kind) {
    case Activation::leaky_relu: launch(LeakyReluForward{desc.slope}); break;
    case Activation::relu6: launch(Relu6Forward{}); break;
    case Activation::sigmoid: launch(SigmoidForward{}); break;
    case Activation::tanh: launch(TanhForward{}); break;
    case Activation::silu: launch(SiluForward{}); break;
    case Activation::gelu: launch(GeluForward{}); break;
    case Activation::hardswish: launch(HardswishForward{}); break;
    case Activation::hardsigmoid: launch(HardsigmoidForward{}); break;
    default: throw ConfigError("activation_forward: unknown activation");
  }
  check_launch("activation_forward_kernel");
  touched(x, y);
}

void CudaBackend::do_activation_backward(const ActivationDesc& desc, const Tensor& x, const Tensor& y, const Tensor& dy,
                                         Tensor dx, bool accumulate) {
  activate();
  const Tensor& v = derivative_from_output(desc) ? y : x;
  const std::size_t n = dy.elements();
  if (n == 0) return;
  auto launch = [&](auto f) {
    if (accumulate) {
      activation_backward_kernel<true><<<blocks_for(n), 256, 0, compute_>>>(v.data, dy.data, dx.data, n, f);
    } else {
      activation_backward_kernel<false><<<blocks_for(n), 256, 0, compute_>>>(v.data, dy.data, dx.data, n, f);
    }
  };
  switch (desc.kind) {
    case Activation::leaky_relu: launch(LeakyReluBackward{desc.slope}); break;
    case Activation::relu6: launch(Relu6Backward{}); break;
    case Activation::sigmoid: launch(SigmoidBackward{}); break;
    case Activation::tanh: launch(TanhBackward{}); break;
    case Activation::silu: launch(SiluBackward{}); break;
    case Activation::gelu: launch(GeluBackward{}); break;
    case Activation::hardswish: launch(HardswishBackward{}); break;
    case Activation::hardsigmoid: launch(HardsigmoidBackward{}); break;
    default: throw ConfigError("activation_backward: unknown activation");
  }
  check_launch("activation_backward_kernel");
  touched(v, dy, dx);
}

}  // namespace cnn::cuda
