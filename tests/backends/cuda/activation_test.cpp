// The activations besides ReLU against the CPU backend, element by element, forward and
// backward, out of place, in place and accumulating. The piecewise-linear ones are the same IEEE
// operations on both sides (equal bits); the smooth ones differ by what expf, tanhf and erff differ
// from the CPU's vectorised functions: a few ulp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "support.hpp"

using namespace cnn;
using namespace cnn::cuda_test;

namespace {

const ActivationDesc kDescs[] = {
    {Activation::leaky_relu, 0.01f}, {Activation::leaky_relu, -0.5f}, {Activation::relu6, 0.01f},
    {Activation::sigmoid, 0.01f},    {Activation::tanh, 0.01f},       {Activation::silu, 0.01f},
    {Activation::gelu, 0.01f},       {Activation::hardswish, 0.01f},  {Activation::hardsigmoid, 0.01f}};

bool piecewise_linear(Activation kind) {
  return kind == Activation::leaky_relu || kind == Activation::relu6 || kind == Activation::hardswish ||
         kind == Activation::hardsigmoid;
}

// Inputs over [-10, 10], the kinks, large magnitudes; an odd count (a partial last block).
std::vector<float> inputs() {
  std::vector<float> x = random_values(4 * 3 * 17 * 19 - 40, 801, -10.0f, 10.0f);
  for (float v : {0.0f, 3.0f, -3.0f, 6.0f, -6.0f, 100.0f, -100.0f, 20.0f, -20.0f, 1e-30f, -1e-30f, 2.9f, -2.9f, 0.5f,
                  -0.5f, 88.0f, -88.0f, 1e4f, -1e4f, 5.9f})
    for (int k = 0; k < 2; ++k) x.push_back(k == 0 ? v : std::nextafter(v, 0.0f));
  return x;
}

// Element by element: equal for the piecewise-linear ones, else within 1e-6 max(1, |x|) (or 1e-30,
// where the CPU flushed a subnormal).
void require_close(const ActivationDesc& d, const std::vector<float>& x, const std::vector<float>& got,
                   const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  std::string first_failure;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double allowed = piecewise_linear(d.kind) ? 0.0 : 1e-6 * std::max(1.0, std::abs(static_cast<double>(x[i])));
    const double diff = std::abs(static_cast<double>(got[i]) - want[i]);
    if (!(diff <= allowed || (diff < 1e-30 && !piecewise_linear(d.kind))) && first_failure.empty())
      first_failure = "x = " + std::to_string(x[i]) + ": gpu " + std::to_string(got[i]) + ", cpu " + std::to_string(want[i]);
  }
  INFO(to_string(d.kind) << " slope " << d.slope << ": " << first_failure);
  CHECK(first_failure.empty());
}

}  // namespace

TEST_CASE("cuda activations forward", "[cuda][activation]") {
  const std::vector<float> values = inputs();
  const Shape s{static_cast<int>(values.size())};
  for (const ActivationDesc& d : kDescs) {
    Twin x(gpu(), s, values), y(gpu(), s, 802);
    cpu().activation_forward(d, x.cpu(), y.cpu());
    gpu().activation_forward(d, x.gpu(), y.gpu());
    require_close(d, values, y.gpu_values(), y.cpu_values());
    // In place: the output written over the input.
    Twin inplace(gpu(), s, values);
    gpu().activation_forward(d, inplace.gpu(), inplace.gpu());
    CHECK(inplace.gpu_values() == y.gpu_values());
  }
}

TEST_CASE("cuda activations backward", "[cuda][activation]") {
  const std::vector<float> values = inputs();
  const Shape s{static_cast<int>(values.size())};
  for (const ActivationDesc& d : kDescs) {
    const bool from_output = derivative_from_output(d);
    Twin x(gpu(), s, values), forward_y(gpu(), s, 803), dy(gpu(), s, 804);
    cpu().activation_forward(d, x.cpu(), forward_y.cpu());
    // Both sides read the CPU's output, so that they differ only by their backward kernels.
    Twin y(gpu(), s, forward_y.cpu_values());
    for (bool accumulate : {false, true}) {
      Twin dx(gpu(), s, 805);
      cpu().activation_backward(d, from_output ? Tensor{} : x.cpu(), from_output ? y.cpu() : Tensor{}, dy.cpu(), dx.cpu(),
                                accumulate);
      gpu().activation_backward(d, from_output ? Tensor{} : x.gpu(), from_output ? y.gpu() : Tensor{}, dy.gpu(), dx.gpu(),
                                accumulate);
      require_close(d, values, dx.gpu_values(), dx.cpu_values());
    }
    // In place: dx written over dy gives what a separate dx got.
    Twin separate(gpu(), s, 806), inplace(gpu(), s, dy.gpu_values());
    gpu().activation_backward(d, from_output ? Tensor{} : x.gpu(), from_output ? y.gpu() : Tensor{}, dy.gpu(),
                              separate.gpu(), false);
    gpu().activation_backward(d, from_output ? Tensor{} : x.gpu(), from_output ? y.gpu() : Tensor{}, inplace.gpu(),
                              inplace.gpu(), false);
    CHECK(inplace.gpu_values() == separate.gpu_values());
  }
}
