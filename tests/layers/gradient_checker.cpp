#include "gradient_checker.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include <cnnengine/engine/core/backend.hpp>
#include "memory/buffer.hpp"
#include "memory/host_resource.hpp"
#include "tests/engine/test_networks.hpp"

namespace cnn::testing {
namespace {

// Evenly spaced values in [-1, 1] in random order: no ties for max pooling, and no value nearer
// to a kink (0 for ReLU, a neighbour for max pooling) than half the spacing.
std::vector<float> spaced_vector(std::size_t n, std::uint64_t seed) {
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return splitmix64(seed + a) < splitmix64(seed + b); });
  std::vector<float> v(n);
  for (std::size_t rank = 0; rank < n; ++rank)
    v[order[rank]] = -1.f + 2.f * (static_cast<float>(rank) + 0.5f) / static_cast<float>(n);
  return v;
}

struct Harness {
  Layer& layer;
  CpuBackend backend{2};
  StepScalars step{42, 0, 1.0f};  // dropout's seed (CPU: host memory is device memory)
  GradientCheckOptions opt;
  std::vector<std::vector<float>> inputs, params, grads, saved;
  std::vector<Shape> input_shapes;
  std::vector<ParamSpec> specs;
  Shape out_shape;
  std::vector<float> output, weights_r;
  memory::Buffer workspace;  // aligned as the planner aligns a workspace

  Harness(Layer& l, const std::vector<Shape>& shapes, const GradientCheckOptions& o) : layer(l), opt(o) {
    for (const auto& s : shapes) input_shapes.push_back(s.batched(o.batch));
    out_shape = layer.output_shape(shapes).batched(o.batch);
    for (std::size_t i = 0; i < shapes.size(); ++i) inputs.push_back(spaced_vector(input_shapes[i].elements(), o.seed + i));
    specs = layer.parameters();
    for (std::size_t k = 0; k < specs.size(); ++k) {
      auto v = random_vector(specs[k].shape.elements(), o.seed + 100 + k);
      if (specs[k].name == "running_var") for (auto& x : v) x = 1.f + std::abs(x);
      params.push_back(v);
      grads.push_back(std::vector<float>(specs[k].trainable ? v.size() : 0, 0.f));
    }
    for (auto n : layer.saved_floats(o.batch)) saved.push_back(std::vector<float>(n));
    const std::size_t ws = std::max(layer.workspace_bytes(backend, o.batch, ConvPass::forward, 1 << 30),
                                    layer.workspace_bytes(backend, o.batch, ConvPass::backward, 1 << 30));
    workspace = memory::Buffer(memory::host_resource(), ws, memory::Category::workspace);
    output.assign(out_shape.elements(), 0.f);
    weights_r = random_vector(output.size(), o.seed + 999);
  }

  std::vector<Tensor> views(std::vector<std::vector<float>>& store, const std::vector<Shape>& shapes) {
    std::vector<Tensor> t;
    for (std::size_t i = 0; i < store.size(); ++i)
      t.push_back(store[i].empty() ? Tensor{} : Tensor{store[i].data(), shapes[i]});
    return t;
  }
  std::vector<Shape> param_shapes() const {
    std::vector<Shape> s;
    for (const auto& p : specs) s.push_back(p.shape);
    return s;
  }
  std::vector<Shape> saved_shapes() const {
    std::vector<Shape> s;
    for (const auto& v : saved) s.push_back(Shape{static_cast<int>(v.size())});
    return s;
  }

  // Views of the harness's buffers; they stay valid while the harness lives.
  struct Views {
    std::vector<Tensor> inputs, params, grads, saved;
  };
  LayerContext context(Views& v) {
    v.inputs = views(inputs, input_shapes);
    v.params = views(params, param_shapes());
    v.grads = views(grads, param_shapes());
    v.saved = views(saved, saved_shapes());
    LayerContext c;
    c.backend = &backend;
    c.batch = opt.batch;
    c.training = opt.training;
    c.step = &step;
    c.inputs = v.inputs;
    c.output = Tensor{output.data(), out_shape};
    c.params = v.params;
    c.grads = v.grads;
    c.saved = v.saved;
    c.workspace = Workspace{workspace.data(), workspace.bytes()};
    c.cross_rank = opt.cross_rank;
    return c;
  }

  double objective() {
    Views v;
    layer.forward(context(v));
    double sum = 0;
    for (std::size_t i = 0; i < output.size(); ++i) sum += static_cast<double>(output[i]) * weights_r[i];
    return sum;
  }

  // Returns dx per input (minus any prefill) and fills grads.
  std::vector<std::vector<float>> analytic(const std::vector<std::vector<float>>& prefill) {
    for (auto& g : grads) std::fill(g.begin(), g.end(), 0.f);
    objective();
    std::vector<std::vector<float>> dx = prefill;
    auto dxv = views(dx, input_shapes);
    std::vector<float> dy = weights_r;
    bool acc[8];
    std::fill(acc, acc + 8, opt.accumulate);
    Views v;
    LayerContext c = context(v);
    c.grad_output = Tensor{dy.data(), out_shape};
    c.grad_inputs = dxv;
    c.accumulate = std::span<const bool>(acc, inputs.size());
    layer.backward(c);
    for (std::size_t i = 0; i < dx.size(); ++i)
      for (std::size_t j = 0; j < dx[i].size(); ++j) dx[i][j] -= prefill[i][j];
    return dx;
  }

  double numeric(float& x) {
    const float original = x;
    x = original + opt.step;
    const double plus = objective();
    x = original - opt.step;
    const double minus = objective();
    x = original;
    return (plus - minus) / (2.0 * opt.step);
  }
};

double relative_error(double a, double b) { return std::abs(a - b) / std::max({1.0, std::abs(a), std::abs(b)}); }

std::vector<std::size_t> sample_indices(std::size_t n, std::size_t max, std::uint64_t seed) {
  std::vector<std::size_t> idx;
  if (n <= max) {
    for (std::size_t i = 0; i < n; ++i) idx.push_back(i);
  } else {
    for (std::size_t k = 0; k < max; ++k) idx.push_back(static_cast<std::size_t>(uniform01(seed, k) * static_cast<float>(n)) % n);
  }
  return idx;
}

}  // namespace

GradientCheckResult check_gradients(Layer& layer, const std::vector<Shape>& shapes, const GradientCheckOptions& o) {
  Harness h(layer, shapes, o);
  std::vector<std::vector<float>> prefill;
  for (std::size_t i = 0; i < h.inputs.size(); ++i)
    prefill.push_back(o.accumulate ? random_vector(h.inputs[i].size(), o.seed + 500 + i)
                                   : std::vector<float>(h.inputs[i].size(), 0.f));
  const auto dx = h.analytic(prefill);
  const auto dparams = h.grads;
  GradientCheckResult r;
  for (std::size_t i = 0; i < h.inputs.size(); ++i)
    for (std::size_t j : sample_indices(h.inputs[i].size(), o.max_checks_per_tensor, o.seed + i)) {
      r.worst_input_error = std::max(r.worst_input_error, relative_error(dx[i][j], h.numeric(h.inputs[i][j])));
      ++r.checked;
    }
  for (std::size_t k = 0; k < h.params.size(); ++k) {
    if (!h.specs[k].trainable) continue;
    for (std::size_t j : sample_indices(h.params[k].size(), o.max_checks_per_tensor, o.seed + 50 + k)) {
      r.worst_param_error = std::max(r.worst_param_error, relative_error(dparams[k][j], h.numeric(h.params[k][j])));
      ++r.checked;
    }
  }
  return r;
}

}  // namespace cnn::testing
