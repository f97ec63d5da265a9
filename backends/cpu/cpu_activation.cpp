// The activations besides ReLU on the CPU (ActivationDesc): PyTorch's formulas, evaluated a SIMD
// packet at a time (backends/cpu/detail/vector_math.hpp), split over the backend's threads.
// Forward may run in place (y is x), backward too (dx is dy): each element is read before it is
// written, by the same thread.
#include <cmath>
#include <string>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/detail/parallel.hpp"
#include "backends/cpu/detail/vector_math.hpp"
#include <cnnengine/base/error.hpp>

namespace cnn {
namespace {

using namespace cpu::vmath;

constexpr float kSqrtHalf = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;  // the normal density's 1 / sqrt(2 pi)

// Calls fn with the packet function of y = f(x) for `desc`.
template <class Fn>
void with_forward(const ActivationDesc& desc, Fn&& fn) {
  const float slope = desc.slope;
  switch (desc.kind) {
    case Activation::leaky_relu:
      return fn([slope](Packet x) { return select(less(splat(0.f), x), x, pmul(x, splat(slope))); });
    case Activation::relu6:
      return fn([](Packet x) { return pmin(pmax(x, splat(0.f)), splat(6.f)); });
    case Activation::sigmoid: return fn([](Packet x) { return sigmoid(x); });
    case Activation::tanh: return fn([](Packet x) { return tanh(x); });
    case Activation::silu: return fn([](Packet x) { return pmul(x, sigmoid(x)); });
    case Activation::gelu:
      return fn([](Packet x) {
        return pmul(pmul(x, splat(0.5f)), padd(splat(1.f), erf(pmul(x, splat(kSqrtHalf)))));
      });
    case Activation::hardswish:
      return fn([](Packet x) {
        const Packet r = pmin(pmax(padd(x, splat(3.f)), splat(0.f)), splat(6.f));
        return pdiv(pmul(x, r), splat(6.f));
      });
    case Activation::hardsigmoid:
      return fn([](Packet x) { return pdiv(pmin(pmax(padd(x, splat(3.f)), splat(0.f)), splat(6.f)), splat(6.f)); });
  }
  throw ConfigError("activation_forward: unknown activation");
}

// Calls fn with the packet function of dx = g(v, dy), v being y where derivative_from_output(desc)
// and x otherwise.
template <class Fn>
void with_backward(const ActivationDesc& desc, Fn&& fn) {
  const float slope = desc.slope;
  switch (desc.kind) {
    case Activation::leaky_relu:  // v > 0 exactly where x > 0, for y as for x when slope > 0
      return fn([slope](Packet v, Packet g) { return select(less(splat(0.f), v), g, pmul(g, splat(slope))); });
    case Activation::relu6:  // 1 inside (0, 6), where y is strictly between 0 and 6
      return fn([](Packet y, Packet g) {
        return select(both(less(splat(0.f), y), less(y, splat(6.f))), g, splat(0.f));
      });
    case Activation::sigmoid:
      return fn([](Packet y, Packet g) { return pmul(pmul(g, psub(splat(1.f), y)), y); });
    case Activation::tanh: return fn([](Packet y, Packet g) { return pmul(g, psub(splat(1.f), pmul(y, y))); });
    case Activation::silu:
      return fn([](Packet x, Packet g) {
        const Packet s = sigmoid(x);
        return pmul(pmul(g, s), padd(splat(1.f), pmul(x, psub(splat(1.f), s))));
      });
    case Activation::gelu:
      return fn([](Packet x, Packet g) {
        const Packet cdf = pmul(splat(0.5f), padd(splat(1.f), erf(pmul(x, splat(kSqrtHalf)))));
        const Packet pdf = pmul(splat(kInvSqrt2Pi), exp(pmul(pmul(x, x), splat(-0.5f))));
        return pmul(g, pmadd(x, pdf, cdf));
      });
    case Activation::hardswish:  // 0 below -3, x / 3 + 1/2 up to 3, 1 above
      return fn([](Packet x, Packet g) {
        const Packet inside = pmul(g, padd(pdiv(x, splat(3.f)), splat(0.5f)));
        return select(less(x, splat(-3.f)), splat(0.f), select(less_equal(x, splat(3.f)), inside, g));
      });
    case Activation::hardsigmoid:  // 1/6 inside (-3, 3), where y is strictly between 0 and 1
      return fn([](Packet y, Packet g) {
        return select(both(less(splat(0.f), y), less(y, splat(1.f))), pmul(g, splat(1.f / 6.f)), splat(0.f));
      });
  }
  throw ConfigError("activation_backward: unknown activation");
}

}  // namespace

void CpuBackend::do_activation_forward(const ActivationDesc& desc, const Tensor& x, Tensor y) {
  const float* in = x.data;
  float* out = y.data;
  with_forward(desc, [&](auto f) {
    cpu::parallel_elements(threads_, x.elements(), [=](std::size_t b, std::size_t e) { map(in, out, b, e, f); });
  });
}

void CpuBackend::do_activation_backward(const ActivationDesc& desc, const Tensor& x, const Tensor& y, const Tensor& dy,
                                        Tensor dx, bool accumulate) {
  const Tensor& v = derivative_from_output(desc) ? y : x;
  const float* a = v.data;
  const float* g = dy.data;
  float* d = dx.data;
  with_backward(desc, [&](auto f) {
    cpu::parallel_elements(threads_, dy.elements(), [=](std::size_t b, std::size_t e) {
      map2(a, g, d, accumulate, b, e, f);
    });
  });
}

}  // namespace cnn
