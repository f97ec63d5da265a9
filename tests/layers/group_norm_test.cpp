// Group and layer normalisation: gradients by finite differences, the forward against a
// double-precision reference (PyTorch's GroupNorm and LayerNorm formulas), per-sample independence,
// determinism, the layer's properties and errors, its planned workspace (backward's only scratch:
// a training step allocates nothing), and its network-text forms.
#include "layers/group_norm.hpp"

#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include <cnnengine/base/error.hpp>
#include <cnnengine/engine/core/network.hpp>
#include "gradient_checker.hpp"
#include <cnnengine/layers/builtin_layers.hpp>
#include "memory/host_resource.hpp"
#include "memory/statistics_adaptor.hpp"
#include <cnnengine/models/network_text.hpp>
#include "tests/engine/test_networks.hpp"
#include "tests/heap_counter.hpp"

using namespace cnn;
using cnn::testing::check_gradients;
using cnn::testing::GradientCheckOptions;
using cnn::testing::random_vector;

namespace {

void require_gradients(GroupNorm layer, Shape shape, int batch) {
  GradientCheckOptions o;
  o.batch = batch;
  o.step = 1e-3f;
  for (bool accumulate : {false, true}) {
    o.accumulate = accumulate;
    GroupNorm l = layer;
    const auto r = check_gradients(l, {shape}, o);
    INFO(l.describe() << " on " << shape.str() << ", batch " << batch << (accumulate ? " (accumulating)" : "")
                      << ": input error " << r.worst_input_error << ", parameter error " << r.worst_param_error);
    CHECK(r.checked > 0);
    CHECK(r.worst_input_error < 1e-2);
    CHECK(r.worst_param_error < 1e-2);
  }
}

// The forward's output, mean and inv_std in double, PyTorch's formulas: each (sample, group)
// normalised over its values with the biased variance, then gamma and beta per channel or element.
struct Reference {
  std::vector<double> y, mean, inv_std;
};
Reference reference(const GroupNormDesc& d, const std::vector<float>& x, const std::vector<float>& gamma,
                    const std::vector<float>& beta, int n, Shape per_sample) {
  const std::size_t sample = per_sample.elements(), channels = static_cast<std::size_t>(per_sample[0]);
  const std::size_t plane = sample / channels, groups = static_cast<std::size_t>(d.groups);
  const std::size_t m = sample / groups;
  Reference r;
  r.y.resize(x.size());
  for (std::size_t s = 0; s < static_cast<std::size_t>(n); ++s)
    for (std::size_t g = 0; g < groups; ++g) {
      const std::size_t at = s * sample + g * m;
      double mean = 0, var = 0;
      for (std::size_t k = 0; k < m; ++k) mean += x[at + k];
      mean /= static_cast<double>(m);
      for (std::size_t k = 0; k < m; ++k) var += (x[at + k] - mean) * (x[at + k] - mean);
      var /= static_cast<double>(m);
      const double inv_std = 1.0 / std::sqrt(var + d.epsilon);
      r.mean.push_back(mean);
      r.inv_std.push_back(inv_std);
      for (std::size_t k = 0; k < m; ++k) {
        const std::size_t a = d.per_element_affine ? g * m + k : (g * m + k) / plane;
        r.y[at + k] = (x[at + k] - mean) * inv_std * gamma[a] + beta[a];
      }
    }
  return r;
}

double worst_difference(const std::vector<float>& got, const std::vector<double>& want) {
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
  return worst;
}

struct Buffers {
  std::vector<float> x, gamma, beta, y, mean, inv_std;
  Buffers(int n, Shape per_sample, std::size_t affine, int groups, std::uint64_t seed, float offset = 0,
          float scale = 1)
      : x(random_vector(per_sample.elements() * static_cast<std::size_t>(n), seed)),
        gamma(random_vector(affine, seed + 1)),
        beta(random_vector(affine, seed + 2)),
        y(x.size()),
        mean(static_cast<std::size_t>(n * groups)),
        inv_std(mean.size()) {
    for (float& v : x) v = offset + scale * v;
  }
};

Tensor view(std::vector<float>& v, Shape s) { return Tensor{v.data(), s}; }

// A workspace of the bytes backward asks for x, in `scratch`.
Workspace workspace(std::vector<double>& scratch, Backend& backend, const GroupNormDesc& d, const Shape& x) {
  scratch.assign(backend.group_norm_workspace_bytes(d, x) / sizeof(double), 0.0);
  return {scratch.data(), scratch.size() * sizeof(double)};
}

}  // namespace

TEST_CASE("group norm gradients", "[gradients][group_norm]") {
  for (int batch : {1, 3}) {
    require_gradients(GroupNorm(1), Shape{4, 3, 5}, batch);
    require_gradients(GroupNorm(2), Shape{4, 3, 5}, batch);
    require_gradients(GroupNorm(4), Shape{4, 3, 5}, batch);   // a group per channel: InstanceNorm
    require_gradients(GroupNorm(2, 1e-3f), Shape{6}, batch);  // flat features: C = 6, no H or W
  }
}

TEST_CASE("layer norm gradients", "[gradients][group_norm]") {
  for (int batch : {1, 3}) {
    require_gradients(GroupNorm::layer_norm(), Shape{3, 4, 5}, batch);
    require_gradients(GroupNorm::layer_norm(), Shape{7}, batch);
  }
}

TEST_CASE("group and layer norm give PyTorch's forward, computed in double", "[group_norm]") {
  CpuBackend backend(2);
  struct Case {
    GroupNormDesc desc;
    Shape shape;
  };
  for (const Case& k : {Case{{2, 1e-5f, false}, Shape{6, 5, 7}}, Case{{1, 1e-5f, false}, Shape{4, 3, 3}},
                        Case{{6, 1e-3f, false}, Shape{6, 4, 4}}, Case{{3, 1e-5f, false}, Shape{12}},
                        Case{{1, 1e-5f, true}, Shape{3, 5, 6}}, Case{{1, 0.1f, true}, Shape{10}},
                        Case{{4, 1e-5f, false}, Shape{8, 19, 21}}}) {
    INFO(k.desc.groups << " groups of " << k.shape.str() << (k.desc.per_element_affine ? ", per element" : ""));
    const int n = 3;
    const std::size_t affine = k.desc.per_element_affine ? k.shape.elements() : static_cast<std::size_t>(k.shape[0]);
    Buffers b(n, k.shape, affine, k.desc.groups, 11, 2.5f, 3.f);
    const Shape xs = k.shape.batched(n), stats{n * k.desc.groups};
    backend.group_norm_forward(k.desc, view(b.x, xs), view(b.gamma, Shape{static_cast<int>(affine)}),
                               view(b.beta, Shape{static_cast<int>(affine)}), view(b.y, xs), view(b.mean, stats),
                               view(b.inv_std, stats));
    const Reference r = reference(k.desc, b.x, b.gamma, b.beta, n, k.shape);
    CHECK(worst_difference(b.y, r.y) < 2e-6);
    CHECK(worst_difference(b.mean, r.mean) < 1e-6);
    for (std::size_t i = 0; i < r.inv_std.size(); ++i) CHECK(std::abs(b.inv_std[i] / r.inv_std[i] - 1) < 1e-6);
  }
}

TEST_CASE("before the affine each group has mean 0 and variance 1, even over 64x112x112 values far from 0",
          "[group_norm]") {
  CpuBackend backend(2);
  const GroupNormDesc d{2, 1e-5f, false};
  const Shape per_sample{128, 112, 112};  // two groups of 64 channels
  const int n = 1;
  Buffers b(n, per_sample, 128, 2, 21, 1000.f, 1.f);  // mean 1000, standard deviation about 0.58
  std::fill(b.gamma.begin(), b.gamma.end(), 1.f);
  std::fill(b.beta.begin(), b.beta.end(), 0.f);
  const Shape xs = per_sample.batched(n);
  backend.group_norm_forward(d, view(b.x, xs), view(b.gamma, Shape{128}), view(b.beta, Shape{128}), view(b.y, xs),
                             view(b.mean, Shape{2}), view(b.inv_std, Shape{2}));
  const Reference r = reference(d, b.x, b.gamma, b.beta, n, per_sample);
  const std::size_t m = per_sample.elements() / 2;
  for (std::size_t g = 0; g < 2; ++g) {
    double mean = 0, var = 0;
    for (std::size_t k = 0; k < m; ++k) mean += b.y[g * m + k];
    mean /= static_cast<double>(m);
    for (std::size_t k = 0; k < m; ++k) var += (b.y[g * m + k] - mean) * (b.y[g * m + k] - mean);
    var /= static_cast<double>(m);
    CHECK(std::abs(mean) < 1e-4);
    CHECK(std::abs(var - 1) < 1e-4);
    CHECK(std::abs(b.mean[g] - r.mean[g]) < 1e-4);
    CHECK(std::abs(b.inv_std[g] / r.inv_std[g] - 1) < 1e-5);
  }
}

TEST_CASE("a sample's group norm does not depend on the other samples, nor on the threads", "[group_norm]") {
  for (const GroupNormDesc d : {GroupNormDesc{2, 1e-5f, false}, GroupNormDesc{1, 1e-5f, true}}) {
    INFO((d.per_element_affine ? "layer norm" : "group norm"));
    const Shape per_sample{4, 9, 9};
    const std::size_t affine = d.per_element_affine ? per_sample.elements() : 4, sample = per_sample.elements();
    const int n = 3;
    Buffers b(n, per_sample, affine, d.groups, 31);
    const std::vector<float> dy = random_vector(b.x.size(), 35);
    const Shape as{static_cast<int>(affine)};

    struct Run {
      std::vector<float> y, dx, dgamma, dbeta;
    };
    auto run = [&](CpuBackend& backend, int first, int count) {
      Run r{std::vector<float>(sample * static_cast<std::size_t>(count)),
            std::vector<float>(sample * static_cast<std::size_t>(count)), std::vector<float>(affine),
            std::vector<float>(affine)};
      std::vector<float> x(b.x.begin() + first * static_cast<std::ptrdiff_t>(sample),
                           b.x.begin() + (first + count) * static_cast<std::ptrdiff_t>(sample));
      std::vector<float> g(dy.begin() + first * static_cast<std::ptrdiff_t>(sample),
                           dy.begin() + (first + count) * static_cast<std::ptrdiff_t>(sample));
      std::vector<float> mean(static_cast<std::size_t>(count * d.groups)), inv_std(mean.size());
      const Shape s = per_sample.batched(count), st{count * d.groups};
      backend.group_norm_forward(d, view(x, s), view(b.gamma, as), view(b.beta, as), view(r.y, s), view(mean, st),
                                 view(inv_std, st));
      std::vector<double> scratch;
      backend.group_norm_backward(d, view(x, s), view(g, s), view(b.gamma, as), view(mean, st), view(inv_std, st),
                                  view(r.dx, s), false, view(r.dgamma, as), view(r.dbeta, as),
                                  workspace(scratch, backend, d, s));
      return r;
    };
    CpuBackend two(2), one(1);
    const Run all = run(two, 0, n);  // the whole batch, on 2 threads and on 1
    const Run all_one_thread = run(one, 0, n);
    CHECK(all.y == all_one_thread.y);
    CHECK(all.dx == all_one_thread.dx);
    CHECK(all.dgamma == all_one_thread.dgamma);
    CHECK(all.dbeta == all_one_thread.dbeta);
    for (int s = 0; s < n; ++s) {
      INFO("sample " << s);
      const Run alone = run(two, s, 1);
      const auto from = static_cast<std::ptrdiff_t>(sample) * s, to = from + static_cast<std::ptrdiff_t>(sample);
      CHECK(std::vector<float>(all.y.begin() + from, all.y.begin() + to) == alone.y);
      CHECK(std::vector<float>(all.dx.begin() + from, all.dx.begin() + to) == alone.dx);
    }
  }
}

TEST_CASE("group norm backward adds to dx when asked, and gives dgamma and dbeta without dx", "[group_norm]") {
  CpuBackend backend(2);
  const GroupNormDesc d{3, 1e-5f, false};
  const Shape per_sample{6, 5, 5};
  const int n = 2;
  Buffers b(n, per_sample, 6, 3, 41);
  const std::vector<float> dy = random_vector(b.x.size(), 45);
  const Shape xs = per_sample.batched(n), cs{6}, st{n * 3};
  backend.group_norm_forward(d, view(b.x, xs), view(b.gamma, cs), view(b.beta, cs), view(b.y, xs), view(b.mean, st),
                             view(b.inv_std, st));
  std::vector<float> grad(dy);
  std::vector<double> scratch;
  const Workspace ws = workspace(scratch, backend, d, xs);
  std::vector<float> dx(b.x.size()), dgamma(6, 0.5f), dbeta(6, -0.25f);
  backend.group_norm_backward(d, view(b.x, xs), view(grad, xs), view(b.gamma, cs), view(b.mean, st),
                              view(b.inv_std, st), view(dx, xs), false, view(dgamma, cs), view(dbeta, cs), ws);
  std::vector<float> added = random_vector(b.x.size(), 46);
  const std::vector<float> before = added;
  std::vector<float> dgamma2(6, 0.f), dbeta2(6, 0.f);
  backend.group_norm_backward(d, view(b.x, xs), view(grad, xs), view(b.gamma, cs), view(b.mean, st),
                              view(b.inv_std, st), view(added, xs), true, view(dgamma2, cs), view(dbeta2, cs), ws);
  for (std::size_t i = 0; i < dx.size(); ++i) CHECK(added[i] == Approx(before[i] + dx[i]).margin(1e-6));
  // Parameter gradients always add: 0.5 and -0.25 were there before.
  for (std::size_t c = 0; c < 6; ++c) {
    CHECK(dgamma[c] == Approx(dgamma2[c] + 0.5f).margin(1e-6));
    CHECK(dbeta[c] == Approx(dbeta2[c] - 0.25f).margin(1e-6));
  }
  std::vector<float> dgamma3(6, 0.f), dbeta3(6, 0.f);
  backend.group_norm_backward(d, view(b.x, xs), view(grad, xs), view(b.gamma, cs), view(b.mean, st),
                              view(b.inv_std, st), Tensor{}, false, view(dgamma3, cs), view(dbeta3, cs), ws);
  CHECK(dgamma3 == dgamma2);
  CHECK(dbeta3 == dbeta2);

  // dbeta is the sum of dy per channel; dgamma of dy x xhat (xhat from the double reference).
  std::fill(b.gamma.begin(), b.gamma.end(), 1.f);
  std::fill(b.beta.begin(), b.beta.end(), 0.f);
  const Reference r = reference(d, b.x, b.gamma, b.beta, n, per_sample);
  for (std::size_t c = 0; c < 6; ++c) {
    double sum_dy = 0, sum_dy_xhat = 0;
    for (std::size_t s = 0; s < 2; ++s)
      for (std::size_t k = 0; k < 25; ++k) {
        const std::size_t i = (s * 6 + c) * 25 + k;
        sum_dy += dy[i];
        sum_dy_xhat += dy[i] * r.y[i];
      }
    CHECK(dbeta3[c] == Approx(sum_dy).margin(1e-5));
    CHECK(dgamma3[c] == Approx(sum_dy_xhat).margin(1e-5));
  }
}

TEST_CASE("the group norm layer's memory, recomputation and batch needs", "[group_norm][layers]") {
  GroupNorm gn(4);
  CHECK(gn.output_shape({Shape{8, 6, 6}}) == Shape{8, 6, 6});
  CHECK(gn.saved_floats(5) == std::vector<std::size_t>{20, 20});
  CHECK(gn.backward_needs_input());
  CHECK_FALSE(gn.backward_needs_output());
  CHECK_FALSE(gn.backward_writes_input_gradient());
  CHECK(gn.recomputable());
  CHECK(gn.cheap_to_recompute());
  CHECK_FALSE(gn.recompute_rewrites_saved());
  CHECK(gn.training_batch_need().samples == 1);
  CHECK(gn.training_batch_need().why.empty());
  CpuBackend cpu(1);
  CHECK(gn.workspace_bytes(cpu, 8, ConvPass::forward, 1 << 20) == 0);
  // Backward's sums of dy xhat and dy per (sample, channel), all 8 samples at once, and their
  // totals: 2 x 8 channels x (8 + 1) doubles.
  CHECK(gn.workspace_bytes(cpu, 8, ConvPass::backward, 1 << 20) == 2 * 8 * 9 * sizeof(double));
  CHECK(gn.workspace_bytes(cpu, 8, ConvPass::backward, 0) == 2 * 8 * 9 * sizeof(double));  // not a choice
  CHECK(gn.forward_cost().flops > 0);
  CHECK(gn.forward_cost().bytes >= 2 * sizeof(float) * 8 * 6 * 6);
  const auto params = gn.parameters();
  REQUIRE(params.size() == 2);
  CHECK(params[0].name == "gamma");
  CHECK(params[0].shape == Shape{8});
  CHECK(params[0].init == Init::ones);
  CHECK(params[1].name == "beta");
  CHECK(params[1].init == Init::zeros);
  CHECK(gn.type_name() == "group_norm");

  GroupNorm ln = GroupNorm::layer_norm();
  ln.output_shape({Shape{3, 4, 5}});
  CHECK(ln.type_name() == "layer_norm");
  CHECK(ln.saved_floats(7) == std::vector<std::size_t>{7, 7});
  CHECK(ln.parameters()[0].shape == Shape{3, 4, 5});
  CHECK(ln.parameters()[1].shape == Shape{3, 4, 5});
  // Layer norm's sums of dy gamma and dy gamma (x - mean) per (sample, segment of 2^14 values).
  CHECK(ln.workspace_bytes(cpu, 7, ConvPass::forward, 1 << 20) == 0);
  CHECK(ln.workspace_bytes(cpu, 7, ConvPass::backward, 1 << 20) == 2 * 7 * sizeof(double));
  ln.output_shape({Shape{3, 100, 100}});  // 30000 values: two segments
  CHECK(ln.workspace_bytes(cpu, 7, ConvPass::backward, 1 << 20) == 2 * 7 * 2 * sizeof(double));
  ln.output_shape({Shape{10}});
  CHECK(ln.parameters()[0].shape == Shape{10});
  CHECK(ln.training_batch_need().samples == 1);
}

TEST_CASE("group norm recomputes its output to the bit, and runs in inference without saved buffers",
          "[group_norm][layers]") {
  for (bool layer_norm : {false, true}) {
    INFO((layer_norm ? "layer norm" : "group norm"));
    GroupNorm layer = layer_norm ? GroupNorm::layer_norm() : GroupNorm(2);
    const Shape per_sample{4, 5, 5};
    layer.output_shape({per_sample});
    const int n = 3;
    CpuBackend backend(2);
    std::vector<float> x = random_vector(per_sample.elements() * n, 51);
    const std::size_t affine = layer.parameters()[0].shape.elements();
    std::vector<float> gamma = random_vector(affine, 52), beta = random_vector(affine, 53);
    const auto floats = layer.saved_floats(n);
    std::vector<float> mean(floats[0]), inv_std(floats[1]), y(x.size()), y2(x.size()), y3(x.size());
    const Tensor input{x.data(), per_sample.batched(n)};
    const Tensor params[] = {{gamma.data(), Shape{static_cast<int>(affine)}},
                             {beta.data(), Shape{static_cast<int>(affine)}}};
    const Tensor saved[] = {{mean.data(), Shape{static_cast<int>(mean.size())}},
                            {inv_std.data(), Shape{static_cast<int>(inv_std.size())}}};
    LayerContext c;
    c.backend = &backend;
    c.batch = n;
    c.training = true;
    c.inputs = std::span<const Tensor>(&input, 1);
    c.params = params;
    c.saved = saved;
    c.output = Tensor{y.data(), per_sample.batched(n)};
    layer.forward(c);
    const std::vector<float> mean_before = mean, inv_std_before = inv_std;
    c.output = Tensor{y2.data(), per_sample.batched(n)};
    layer.recompute(c);
    CHECK(y2 == y);
    CHECK(mean == mean_before);
    CHECK(inv_std == inv_std_before);

    c.training = false;
    c.saved = {};
    c.output = Tensor{y3.data(), per_sample.batched(n)};
    layer.forward(c);
    CHECK(y3 == y);
  }
}

namespace {

// The layer's forward, then its backward with `ws` (dx written, dgamma and dbeta added to zeros).
struct LayerGradients {
  std::vector<float> dx, dgamma, dbeta;
};
LayerGradients layer_backward(GroupNorm& layer, CpuBackend& backend, const Shape& per_sample, int n, Workspace ws) {
  const Shape xs = per_sample.batched(n);
  const std::size_t affine = layer.parameters()[0].shape.elements();
  const Shape as{static_cast<int>(affine)};
  std::vector<float> x = random_vector(xs.elements(), 61), dy = random_vector(xs.elements(), 62);
  for (float& v : x) v = 3 * v + 0.5f;
  std::vector<float> gamma = random_vector(affine, 63), beta = random_vector(affine, 64), y(x.size());
  const auto floats = layer.saved_floats(n);
  std::vector<float> mean(floats[0]), inv_std(floats[1]);
  LayerGradients r{std::vector<float>(x.size()), std::vector<float>(affine), std::vector<float>(affine)};
  const Tensor input = view(x, xs), params[] = {view(gamma, as), view(beta, as)};
  const Tensor saved[] = {view(mean, Shape{static_cast<int>(mean.size())}),
                          view(inv_std, Shape{static_cast<int>(inv_std.size())})};
  const Tensor grads[] = {view(r.dgamma, as), view(r.dbeta, as)}, grad_input = view(r.dx, xs);
  const bool accumulate[] = {false};
  LayerContext c;
  c.backend = &backend;
  c.batch = n;
  c.inputs = std::span<const Tensor>(&input, 1);
  c.params = params;
  c.saved = saved;
  c.output = view(y, xs);
  layer.forward(c);
  c.grads = grads;
  c.grad_output = view(dy, xs);
  c.grad_inputs = std::span<const Tensor>(&grad_input, 1);
  c.accumulate = accumulate;
  c.workspace = ws;
  layer.backward(c);
  return r;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace

TEST_CASE("group norm's backward uses exactly the workspace the layer plans, and refuses less",
          "[group_norm][layers][memory]") {
  struct Case {
    bool layer_norm;
    int groups, n;
    Shape per_sample;
  };
  // Shapes whose samples come in several chunks (300 channels: 109 samples at a time; layer norm
  // over 270 000 values: 17 segments, 62 samples at a time) and in one.
  for (const Case k : {Case{false, 4, 5, Shape{8, 6, 7}}, Case{false, 10, 200, Shape{300, 2, 2}},
                       Case{false, 3, 3, Shape{12}}, Case{true, 1, 6, Shape{4, 9, 9}},
                       Case{true, 1, 63, Shape{3, 300, 300}}}) {
    GroupNorm layer = k.layer_norm ? GroupNorm::layer_norm() : GroupNorm(k.groups);
    layer.output_shape({k.per_sample});
    INFO(layer.describe() << " on " << k.per_sample.str() << ", batch " << k.n);
    CpuBackend backend(2);
    const std::size_t bytes = layer.workspace_bytes(backend, k.n, ConvPass::backward, 0);
    REQUIRE(bytes > 0);
    REQUIRE(bytes % sizeof(double) == 0);
    const std::size_t doubles = bytes / sizeof(double), guard = 64;
    const double pattern = std::bit_cast<double>(std::uint64_t{0x7ff4'dead'beef'0123});  // a NaN no sum gives
    std::vector<double> planned(doubles + guard, pattern);
    const LayerGradients exact = layer_backward(layer, backend, k.per_sample, k.n, {planned.data(), bytes});
    for (std::size_t i = doubles; i < planned.size(); ++i) CHECK(same_bits(planned[i], pattern));
    CHECK_FALSE(same_bits(planned[doubles - 1], pattern));  // all of it is used: the plan is not too generous

    std::vector<double> roomy(2 * doubles + 100, pattern);
    const LayerGradients more = layer_backward(layer, backend, k.per_sample, k.n, {roomy.data(), 8 * roomy.size()});
    CHECK(more.dx == exact.dx);
    CHECK(more.dgamma == exact.dgamma);
    CHECK(more.dbeta == exact.dbeta);
    CHECK_THROWS_WITH(layer_backward(layer, backend, k.per_sample, k.n, {planned.data(), bytes - sizeof(double)}),
                      Catch::Contains("group_norm_backward") && Catch::Contains(std::to_string(bytes) + " needed"));
    CHECK_THROWS_AS(layer_backward(layer, backend, k.per_sample, k.n, {}), std::logic_error);
  }
}

TEST_CASE("training networks with group norm and layer norm allocates nothing after the plan",
          "[group_norm][memory][trainer]") {
  const Shape image{3, 12, 12};
  CpuBackend backend(2);
  {
    // Warm-up on a network without normalisation: the backend's and OpenMP's thread pools.
    Network warm = parse_network("conv 8 3 pad=1\nrelu\nflatten\ndense 4\n", image, 4);
    TrainerOptions o;
    o.batch = 16;
    o.micro_batch = 8;
    Trainer trainer(warm, backend, memory::host_resource(), o);
    testing::SyntheticData data(16, image, 4, 5);
    trainer.train_step(data.batch(0, 16));
  }
  for (const char* text : {"conv 16 3 pad=1\ngroupnorm 4\nrelu\nconv 8 3 pad=1\ngroupnorm 8\nflatten\ndense 4\n",
                           "conv 8 3 pad=1\nlayernorm\nrelu\nflatten\ndense 32\nlayernorm\ndense 4\n"}) {
    INFO(text);
    Network net = parse_network(text, image, 4);
    memory::StatisticsAdaptor stats(memory::host_resource());
    TrainerOptions o;
    o.batch = 16;
    o.micro_batch = 8;
    Trainer trainer(net, backend, stats, o);
    testing::SyntheticData data(16 * 3, image, 4, 7);
    // From the first step: scratch kept between calls would be allocated there.
    const auto before = stats.statistics();
    const long heap_before = testing::heap_allocations();
    for (int s = 0; s < 3; ++s) trainer.train_step(data.batch(s * 16, 16));
    const auto after = stats.statistics();
    CHECK(after.allocations == before.allocations);
    CHECK(after.peak_bytes == before.peak_bytes);
    CHECK(testing::heap_allocations() == heap_before);
  }
}

TEST_CASE("group norm refuses what it cannot take, naming the layer and the values", "[group_norm][layers]") {
  CHECK_THROWS_WITH(GroupNorm(0), Catch::Contains("group_norm") && Catch::Contains("got 0"));
  CHECK_THROWS_AS(GroupNorm(-2), ConfigError);
  CHECK_THROWS_WITH(GroupNorm(2, 0.f), Catch::Contains("group_norm") && Catch::Contains("eps"));
  CHECK_THROWS_AS(GroupNorm(2, -1e-5f), ConfigError);
  CHECK_THROWS_AS(GroupNorm(2, std::numeric_limits<float>::infinity()), ConfigError);
  CHECK_THROWS_AS(GroupNorm(2, std::numeric_limits<float>::quiet_NaN()), ConfigError);
  CHECK_THROWS_WITH(GroupNorm::layer_norm(0.f), Catch::Contains("layer_norm") && Catch::Contains("eps"));
  CHECK_THROWS_AS(layers::group_norm(0), ConfigError);
  CHECK_THROWS_AS(layers::layer_norm(-1.f), ConfigError);

  GroupNorm three(3);
  CHECK_THROWS_WITH(three.output_shape({Shape{8, 4, 4}}),
                    Catch::Contains("group_norm 3") && Catch::Contains("3 groups") && Catch::Contains("8 channels"));
  CHECK_THROWS_AS(three.output_shape({Shape{8, 4, 4}}), ShapeError);
  CHECK_THROWS_AS(three.output_shape({Shape{10}}), ShapeError);
  CHECK_THROWS_AS(three.output_shape({Shape{6, 4}}), ShapeError);
  CHECK(three.output_shape({Shape{9}}) == Shape{9});

  Network net(Shape{4, 6, 6});
  CHECK_THROWS_AS(net.add(layers::group_norm(3)), ShapeError);
}

TEST_CASE("groupnorm and layernorm in network text", "[group_norm][network]") {
  const std::string text =
      "conv 8 3 pad=1\n"
      "groupnorm 4\n"
      "relu\n"
      "conv 8 3 pad=1\n"
      "groupnorm 8 eps=0.001\n"
      "layernorm\n"
      "dense 16\n"
      "layernorm eps=0.01\n"
      "dense 3\n";
  const Network net = parse_network(text, Shape{1, 6, 6}, 3);
  CHECK(network_text(net) == text);
  const Network again = parse_network(network_text(net), Shape{1, 6, 6}, 3);
  CHECK(network_text(again) == text);

  const auto& g4 = dynamic_cast<const GroupNorm&>(*net.node(2).layer);
  CHECK(g4.groups() == 4);
  CHECK(g4.epsilon() == 1e-5f);
  CHECK_FALSE(g4.is_layer_norm());
  const auto& g8 = dynamic_cast<const GroupNorm&>(*net.node(5).layer);
  CHECK(g8.groups() == 8);
  CHECK(g8.epsilon() == 0.001f);
  const auto& ln = dynamic_cast<const GroupNorm&>(*net.node(6).layer);
  CHECK(ln.is_layer_norm());
  CHECK(ln.parameters()[0].shape == Shape{8, 6, 6});
  const auto& ln_flat = dynamic_cast<const GroupNorm&>(*net.node(8).layer);
  CHECK(ln_flat.epsilon() == 0.01f);
  CHECK(ln_flat.parameters()[0].shape == Shape{16});
  CHECK(net.node(2).name == "2:group_norm");
  CHECK(net.node(6).name == "6:layer_norm");

  // The built-in functions build what the text builds.
  Network built(Shape{1, 6, 6});
  built.add(layers::conv2d(8, 3, 1, 1));
  built.add(layers::group_norm(4));
  built.add(layers::relu());
  built.add(layers::conv2d(8, 3, 1, 1));
  built.add(layers::group_norm(8, 0.001f));
  built.add(layers::layer_norm());
  built.add(layers::dense(16));
  built.add(layers::layer_norm(0.01f));
  built.add(layers::dense(3));
  CHECK(network_text(built) == text);
}

TEST_CASE("groupnorm and layernorm lines that are wrong say what is wrong", "[group_norm][network]") {
  auto error = [](const std::string& text) -> std::string {
    try {
      parse_network(text, Shape{1, 6, 6}, 3, "net.txt");
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  };
  CHECK_THAT(error("conv 8 3\ngroupnorm\nflatten\ndense 3\n"),
             Catch::Contains("net.txt:2") && Catch::Contains("groupnorm GROUPS [eps=E]"));
  CHECK_THAT(error("conv 8 3\ngroupnorm 2 4\nflatten\ndense 3\n"), Catch::Contains("expected: groupnorm GROUPS"));
  CHECK_THAT(error("conv 8 3\ngroupnorm 2.5\nflatten\ndense 3\n"), Catch::Contains("not a whole number"));
  CHECK_THAT(error("conv 8 3\ngroupnorm 0\nflatten\ndense 3\n"),
             Catch::Contains("net.txt:2") && Catch::Contains("got 0"));
  CHECK_THAT(error("conv 8 3\ngroupnorm 2 momentum=0.1\nflatten\ndense 3\n"),
             Catch::Contains("unknown option 'momentum'") && Catch::Contains("eps="));
  CHECK_THAT(error("conv 8 3\ngroupnorm 2 eps=0\nflatten\ndense 3\n"), Catch::Contains("eps"));
  CHECK_THAT(error("conv 8 3\ngroupnorm 2 eps=-1\nflatten\ndense 3\n"), Catch::Contains("eps"));
  CHECK_THAT(error("conv 8 3\ngroupnorm 2 eps=x\nflatten\ndense 3\n"), Catch::Contains("'x' is not a number"));
  CHECK_THAT(error("conv 8 3\ngroupnorm 3\nflatten\ndense 3\n"),
             Catch::Contains("net.txt:2") && Catch::Contains("3 groups") && Catch::Contains("8 channels"));
  CHECK_THAT(error("conv 8 3\nlayernorm 2\nflatten\ndense 3\n"), Catch::Contains("layernorm [eps=E]"));
  CHECK_THAT(error("conv 8 3\nlayernorm eps=0\nflatten\ndense 3\n"),
             Catch::Contains("layer_norm") && Catch::Contains("eps"));
  CHECK_THAT(error("conv 8 3\nlayernorm bias=0\nflatten\ndense 3\n"), Catch::Contains("unknown option 'bias'"));
  CHECK_THROWS_AS(parse_network("conv 8 3\ngroupnorm 3\nflatten\ndense 3\n", Shape{1, 6, 6}, 3), ShapeError);
}
