// A BatchNorm recomputed during backward (docs/design.md, "Recomputation") normalises with the
// batch statistics forward saved: on the CPU its output is forward's to the bit, and the running
// statistics, which moved once in forward, do not move again.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "layers/batchnorm2d.hpp"
#include "tests/engine/test_networks.hpp"

using namespace cnn;
using cnn::testing::random_vector;

namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

Tensor view(std::vector<float>& v, Shape shape) { return Tensor{v.data(), shape}; }

}  // namespace

TEST_CASE("batchnorm from saved statistics gives training forward's output to the bit", "[batchnorm][recompute]") {
  CpuBackend backend(2);
  for (const Shape xs : {Shape{5, 3, 7, 9}, Shape{16, 32, 8, 8}, Shape{6, 10}}) {
    INFO("input " << xs.str());
    const int c = xs[1];
    std::vector<float> x = random_vector(xs.elements(), 3), gamma = random_vector(c, 4), beta = random_vector(c, 5);
    for (float& v : x) v = 4 * v + 1;  // a mean and a scale that are not 0 and 1
    std::vector<float> running_mean(c, 0.f), running_var(c, 1.f), mean(c), inv_std(c);
    std::vector<float> y(xs.elements()), again(xs.elements(), -7.f);
    backend.batchnorm_forward_training(view(x, xs), view(gamma, {c}), view(beta, {c}), view(y, xs),
                                       view(running_mean, {c}), view(running_var, {c}), 0.1f, 1e-5f,
                                       view(mean, {c}), view(inv_std, {c}));
    backend.batchnorm_forward_saved(view(x, xs), view(gamma, {c}), view(beta, {c}), view(mean, {c}),
                                    view(inv_std, {c}), view(again, xs));
    CHECK(same_bits(again, y));
  }
}

TEST_CASE("a recomputed BatchNorm layer moves no running statistic", "[batchnorm][recompute]") {
  CpuBackend backend(2);
  BatchNorm2D layer;
  const Shape sample{4, 5, 5};
  layer.output_shape({sample});
  const int n = 6, c = 4;
  const Shape xs = sample.batched(n);
  std::vector<float> x = random_vector(xs.elements(), 8), gamma = random_vector(c, 9), beta = random_vector(c, 10);
  std::vector<float> running_mean(c, 0.5f), running_var(c, 2.f), mean(c), inv_std(c);
  std::vector<float> y(xs.elements()), again(xs.elements(), -7.f);
  const Tensor params[] = {view(gamma, {c}), view(beta, {c}), view(running_mean, {c}), view(running_var, {c})};
  const Tensor saved[] = {view(mean, {c}), view(inv_std, {c})};
  const Tensor inputs[] = {view(x, xs)};
  LayerContext context;
  context.backend = &backend;
  context.batch = n;
  context.inputs = inputs;
  context.params = params;
  context.saved = saved;
  context.output = view(y, xs);
  layer.forward(context);
  const std::vector<float> mean_after_forward = running_mean, var_after_forward = running_var;
  CHECK_FALSE(same_bits(mean_after_forward, std::vector<float>(c, 0.5f)));  // forward moved them

  context.output = view(again, xs);
  layer.recompute(context);
  CHECK(same_bits(again, y));
  CHECK(same_bits(running_mean, mean_after_forward));
  CHECK(same_bits(running_var, var_after_forward));
}
