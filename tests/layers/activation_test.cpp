// The activations besides ReLU (layers/activation.hpp, the CPU kernels of
// backends/cpu/cpu_activation.cpp): values against PyTorch's formulas evaluated in double, the
// derivatives at and between the kinks, in-place and accumulating calls, finite-difference
// gradients, network text and the properties the planner reads.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include <cnnengine/base/error.hpp>
#include <cnnengine/engine/core/network.hpp>
#include "gradient_checker.hpp"
#include "layers/activation.hpp"
#include <cnnengine/layers/builtin_layers.hpp>
#include "layers/flatten.hpp"
#include <cnnengine/models/network_text.hpp>
#include "tests/engine/test_networks.hpp"

using namespace cnn;

namespace {

constexpr Activation kAll[] = {Activation::leaky_relu, Activation::relu6,     Activation::sigmoid,
                               Activation::tanh,       Activation::silu,      Activation::gelu,
                               Activation::hardswish,  Activation::hardsigmoid};

// PyTorch's definitions, in double where they are smooth (the phi and Phi of the normal
// distribution from erfc, which does not cancel for negative x).
double reference(const ActivationDesc& d, double x) {
  switch (d.kind) {
    case Activation::leaky_relu: return x > 0 ? x : static_cast<double>(static_cast<float>(x) * d.slope);
    case Activation::relu6: return std::min(std::max(x, 0.0), 6.0);
    case Activation::sigmoid: return 1 / (1 + std::exp(-x));
    case Activation::tanh: return std::tanh(x);
    case Activation::silu: return x / (1 + std::exp(-x));
    case Activation::gelu: return x * 0.5 * std::erfc(-x / std::sqrt(2.0));
    case Activation::hardswish: {  // float arithmetic, as PyTorch: compared bit for bit
      const float f = static_cast<float>(x);
      return f * std::min(std::max(f + 3.f, 0.f), 6.f) / 6.f;
    }
    case Activation::hardsigmoid: {
      const float f = static_cast<float>(x);
      return std::min(std::max(f + 3.f, 0.f), 6.f) / 6.f;
    }
  }
  return 0;
}

double reference_derivative(const ActivationDesc& d, double x) {
  const double s = 1 / (1 + std::exp(-x));
  switch (d.kind) {
    case Activation::leaky_relu: return x > 0 ? 1 : d.slope;
    case Activation::relu6: return x > 0 && x < 6 ? 1 : 0;
    case Activation::sigmoid: return s * (1 - s);
    case Activation::tanh: return 1 - std::tanh(x) * std::tanh(x);
    case Activation::silu: return s * (1 + x * (1 - s));
    case Activation::gelu:
      return 0.5 * std::erfc(-x / std::sqrt(2.0)) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
    case Activation::hardswish: return x < -3 ? 0 : x <= 3 ? x / 3 + 0.5 : 1;
    case Activation::hardsigmoid: return x > -3 && x < 3 ? 1.0 / 6 : 0;
  }
  return 0;
}

bool exact_in_float(Activation kind) {
  return kind == Activation::leaky_relu || kind == Activation::relu6 || kind == Activation::hardswish ||
         kind == Activation::hardsigmoid;
}

// -20..20 in steps of 1/4096 (where the vectorised exp, erf and the polynomial of tanh change
// form too), the kinks and their float neighbours, tiny and large magnitudes.
std::vector<float> grid() {
  std::vector<float> x;
  for (int i = -20 * 4096; i <= 20 * 4096; ++i) x.push_back(static_cast<float>(i) / 4096.f);
  for (float v : {1e-30f, 1e-7f, 3e-4f, 0.6249f, 0.6251f}) {
    x.push_back(v);
    x.push_back(-v);
  }
  for (float k : {-6.f, -3.f, 3.f, 6.f}) {  // 0's neighbours are subnormal: the kernels read them as 0
    x.push_back(std::nextafter(k, -100.f));
    x.push_back(std::nextafter(k, 100.f));
  }
  for (float big : {15.f, 20.f, 40.f, 87.f, 89.f, 100.f, 1e4f, 1e30f}) {
    x.push_back(big);
    x.push_back(-big);
  }
  return x;
}

Tensor view(std::vector<float>& v) { return Tensor{v.data(), Shape{static_cast<int>(v.size())}}; }

std::vector<float> forward(Backend& backend, const ActivationDesc& d, std::vector<float> x) {
  std::vector<float> y(x.size());
  backend.activation_forward(d, view(x), view(y));
  return y;
}

// dx for dy, from x (and the output forward gives, where backward reads it).
std::vector<float> backward(Backend& backend, const ActivationDesc& d, std::vector<float> x, std::vector<float> dy,
                            std::vector<float> dx = {}, bool accumulate = false) {
  std::vector<float> y = forward(backend, d, x);
  if (dx.empty()) dx.assign(x.size(), std::numeric_limits<float>::quiet_NaN());  // must be written
  const bool from_output = derivative_from_output(d);
  backend.activation_backward(d, from_output ? Tensor{} : view(x), from_output ? view(y) : Tensor{}, view(dy), view(dx),
                              accumulate);
  return dx;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The input scaled by `scale` on its way in (and the gradient on its way out): the gradient
// checker's inputs span [-1, 1], this carries them over the kinks at -3, 3 and 6.
class Widened final : public Layer {
 public:
  Widened(std::unique_ptr<Layer> inner, float scale) : inner_(std::move(inner)), scale_(scale) {}
  std::string type_name() const override { return inner_->type_name(); }
  std::string describe() const override { return inner_->describe() + " on inputs times " + std::to_string(scale_); }
  Shape output_shape(const std::vector<Shape>& inputs) override { return inner_->output_shape(inputs); }
  bool backward_needs_input() const override { return true; }
  bool backward_needs_output() const override { return true; }
  void forward(const LayerContext& c) override { inner_->forward(inner(c)); }
  void backward(const LayerContext& c) override {
    if (!wants_gradient(c, 0)) return;
    LayerContext ic = inner(c);
    dx_.assign(c.inputs[0].elements(), 0.f);
    dx_view_ = Tensor{dx_.data(), c.inputs[0].shape};
    ic.grad_inputs = std::span<const Tensor>(&dx_view_, 1);
    ic.accumulate = std::span<const bool>(&kFalse, 1);
    inner_->backward(ic);
    float* dx = c.grad_inputs[0].data;
    for (std::size_t i = 0; i < dx_.size(); ++i) dx[i] = (c.accumulate[0] ? dx[i] : 0.f) + scale_ * dx_[i];
  }

 private:
  LayerContext inner(const LayerContext& c) {
    x_.resize(c.inputs[0].elements());
    for (std::size_t i = 0; i < x_.size(); ++i) x_[i] = scale_ * c.inputs[0].data[i];
    x_view_ = Tensor{x_.data(), c.inputs[0].shape};
    LayerContext ic = c;
    ic.inputs = std::span<const Tensor>(&x_view_, 1);
    return ic;
  }

  static constexpr bool kFalse = false;
  std::unique_ptr<Layer> inner_;
  float scale_;
  std::vector<float> x_, dx_;
  Tensor x_view_, dx_view_;
};

}  // namespace

TEST_CASE("activations compute PyTorch's values, finite and exact at the limits", "[activation]") {
  CpuBackend backend(2);
  const std::vector<float> x = grid();
  for (Activation kind : kAll) {
    for (float slope : {0.01f, 0.2f, -0.5f}) {
      if (kind != Activation::leaky_relu && slope != 0.01f) continue;
      const ActivationDesc d{kind, slope};
      INFO(to_string(kind) << " slope " << slope);
      const std::vector<float> y = forward(backend, d, x);
      // Exact where PyTorch's float arithmetic is (the piecewise-linear ones); otherwise within 4e-7
      // of the value (3.4 ulp), or 1e-30 (the kernels flush subnormals), and gelu's 1 + erf(x / sqrt 2),
      // which cancels below 0 as PyTorch's does: there within 2e-7 |x|.
      double worst = 0;
      std::string first_failure;
      for (std::size_t i = 0; i < x.size(); ++i) {
        const double want = reference(d, x[i]);
        const double error = std::abs(y[i] - want);
        const double allowed =
            exact_in_float(kind)
                ? 0.0
                : std::max(kind == Activation::gelu ? 2e-7 * std::abs(x[i]) : 0.0, 4e-7 * std::abs(want)) + 1e-30;
        if (error > 0) worst = std::max(worst, error / allowed);
        if ((!std::isfinite(y[i]) || error > allowed) && first_failure.empty())
          first_failure = "x = " + std::to_string(x[i]) + ": " + std::to_string(y[i]) + ", want " + std::to_string(want);
      }
      INFO("worst error / allowed " << worst << "; first failure: " << first_failure);
      CHECK(first_failure.empty());
    }
  }
  // The limits, exactly.
  auto at = [&](Activation kind, float v) { return forward(backend, ActivationDesc{kind}, {v})[0]; };
  CHECK(at(Activation::sigmoid, 100.f) == 1.f);
  CHECK(at(Activation::sigmoid, -100.f) == 0.f);
  CHECK(at(Activation::sigmoid, 0.f) == 0.5f);
  CHECK(at(Activation::tanh, 100.f) == 1.f);
  CHECK(at(Activation::tanh, -100.f) == -1.f);
  CHECK(at(Activation::tanh, 0.f) == 0.f);
  CHECK(at(Activation::silu, 100.f) == 100.f);
  CHECK(at(Activation::silu, -100.f) == 0.f);
  CHECK(at(Activation::gelu, 100.f) == 100.f);
  CHECK(at(Activation::gelu, -100.f) == 0.f);
  CHECK(at(Activation::gelu, 0.f) == 0.f);
  CHECK(at(Activation::relu6, 7.f) == 6.f);
  CHECK(at(Activation::relu6, -1.f) == 0.f);
  CHECK(at(Activation::hardswish, -3.f) == 0.f);
  CHECK(at(Activation::hardswish, 3.f) == 3.f);
  CHECK(at(Activation::hardswish, 1.5f) == 1.125f);  // 1.5 * 4.5 / 6
  CHECK(at(Activation::hardsigmoid, 0.f) == 0.5f);
  CHECK(at(Activation::hardsigmoid, 3.f) == 1.f);
  CHECK(at(Activation::hardsigmoid, -3.f) == 0.f);
  CHECK(at(Activation::leaky_relu, -2.f) == -0.02f);
  CHECK(forward(backend, ActivationDesc{Activation::leaky_relu, -0.5f}, {-2.f})[0] == 1.f);
}

TEST_CASE("activation derivatives are PyTorch's, at the kinks too", "[activation]") {
  CpuBackend backend(2);
  const std::vector<float> x = grid();
  for (Activation kind : kAll) {
    for (float slope : {0.01f, -0.5f}) {
      if (kind != Activation::leaky_relu && slope != 0.01f) continue;
      const ActivationDesc d{kind, slope};
      INFO(to_string(kind) << " slope " << slope);
      const std::vector<float> dx = backward(backend, d, x, std::vector<float>(x.size(), 1.f));
      // Exact for the piecewise-linear ones, else within 1e-6 max(1, |x|): from a rounded output
      // (sigmoid, tanh), 1 - y has lost what y rounded off, as in PyTorch's backward.
      std::string first_failure;
      for (std::size_t i = 0; i < x.size(); ++i) {
        if (std::abs(x[i]) > 1e4f) continue;
        // hardsigmoid's derivative comes from its output, which rounds to 1 at the float just
        // below 3: there 0, where PyTorch's (from x) is 1/6 (checked below).
        if (kind == Activation::hardsigmoid && x[i] == std::nextafter(3.f, 0.f)) continue;
        const double want = reference_derivative(d, x[i]);
        const bool exact = exact_in_float(kind) && kind != Activation::hardswish;
        const bool ok = exact ? dx[i] == static_cast<float>(want)
                              : std::abs(dx[i] - want) <= 1e-6 * std::max(1.0, std::abs(static_cast<double>(x[i])));
        if (!ok && first_failure.empty())
          first_failure = "x = " + std::to_string(x[i]) + ": " + std::to_string(dx[i]) + ", want " + std::to_string(want);
      }
      INFO("first failure: " << first_failure);
      CHECK(first_failure.empty());
    }
  }
  // The kinks, as PyTorch's backward kernels give them, for dy = 2.
  auto at = [&](Activation kind, float v, float slope = 0.01f) {
    return backward(backend, ActivationDesc{kind, slope}, {v}, {2.f})[0];
  };
  CHECK(at(Activation::leaky_relu, 0.f) == 2.f * 0.01f);
  CHECK(at(Activation::leaky_relu, 0.f, -0.5f) == -1.f);
  CHECK(at(Activation::leaky_relu, 1e-30f, 0.2f) == 2.f);
  CHECK(at(Activation::relu6, 0.f) == 0.f);
  CHECK(at(Activation::relu6, 6.f) == 0.f);
  CHECK(at(Activation::relu6, 5.5f) == 2.f);
  CHECK(at(Activation::relu6, 1e-30f) == 2.f);
  CHECK(at(Activation::hardswish, -3.f) == -1.f);            // x <= 3 side: 2 (-3/3 + 0.5)
  CHECK(at(Activation::hardswish, std::nextafter(-3.f, -4.f)) == 0.f);
  CHECK(at(Activation::hardswish, 3.f) == 3.f);              // 2 (3/3 + 0.5)
  CHECK(at(Activation::hardswish, std::nextafter(3.f, 4.f)) == 2.f);
  CHECK(at(Activation::hardswish, 0.f) == 1.f);
  CHECK(at(Activation::hardsigmoid, -3.f) == 0.f);
  CHECK(at(Activation::hardsigmoid, 3.f) == 0.f);
  CHECK(at(Activation::hardsigmoid, std::nextafter(-3.f, 0.f)) == 2.f / 6.f);
  CHECK(at(Activation::hardsigmoid, 2.5f) == 2.f / 6.f);
  CHECK(at(Activation::hardsigmoid, std::nextafter(3.f, 0.f)) == 0.f);  // its output is 1 (see above)
  CHECK(at(Activation::sigmoid, 0.f) == 0.5f);  // 2 * 0.25
  CHECK(at(Activation::tanh, 0.f) == 2.f);
  CHECK(at(Activation::silu, 0.f) == 1.f);
  CHECK(at(Activation::gelu, 0.f) == 1.f);
  CHECK(at(Activation::gelu, 100.f) == 2.f);
  CHECK(at(Activation::gelu, -100.f) == 0.f);
  CHECK(at(Activation::silu, -100.f) == 0.f);
  CHECK(at(Activation::silu, 100.f) == 2.f);
}

TEST_CASE("activations run in place, accumulate, and give the same bits on any thread count", "[activation]") {
  CpuBackend one(1), two(2);
  const std::size_t n = (std::size_t{1} << 20) + 13;  // split over threads, with a partial packet at the end
  using cnn::testing::random_vector;
  std::vector<float> x = random_vector(n, 5), dy = random_vector(n, 6), prefill = random_vector(n, 7);
  for (auto& v : x) v *= 8.f;
  for (Activation kind : kAll) {
    const ActivationDesc d{kind, 0.1f};
    INFO(to_string(kind));
    const std::vector<float> y = forward(two, d, x);
    CHECK(same_bits(forward(one, d, x), y));
    std::vector<float> in_place = x;
    two.activation_forward(d, view(in_place), view(in_place));
    CHECK(same_bits(in_place, y));

    const std::vector<float> dx = backward(two, d, x, dy);
    CHECK(same_bits(backward(one, d, x, dy), dx));
    // In place: dx written over dy.
    std::vector<float> y_copy = y, x_copy = x, g = dy;
    const bool from_output = derivative_from_output(d);
    two.activation_backward(d, from_output ? Tensor{} : view(x_copy), from_output ? view(y_copy) : Tensor{}, view(g),
                            view(g), false);
    CHECK(same_bits(g, dx));
    // Accumulating adds to what dx holds.
    const std::vector<float> summed = backward(two, d, x, dy, prefill, true);
    std::vector<float> expected(n);
    for (std::size_t i = 0; i < n; ++i) expected[i] = prefill[i] + dx[i];
    CHECK(same_bits(summed, expected));
  }
}

TEST_CASE("activation gradients", "[gradients][activation]") {
  using cnn::testing::check_gradients;
  using cnn::testing::GradientCheckOptions;
  const std::vector<std::unique_ptr<Layer> (*)()> makers = {
      [] { return layers::leaky_relu(); },    [] { return layers::leaky_relu(0.3f); },
      [] { return layers::leaky_relu(-0.5f); }, [] { return layers::relu6(); },
      [] { return layers::sigmoid(); },       [] { return layers::tanh(); },
      [] { return layers::silu(); },          [] { return layers::gelu(); },
      [] { return layers::hardswish(); },     [] { return layers::hardsigmoid(); }};
  for (auto make : makers) {
    for (bool accumulate : {false, true}) {
      GradientCheckOptions o;
      o.step = 1e-3f;
      o.accumulate = accumulate;
      o.max_checks_per_tensor = 1000;
      {
        // The checker's inputs: 270 evenly spaced over [-1, 1], none nearer to 0 than 1/270.
        const auto layer = make();
        const auto r = check_gradients(*layer, {Shape{3, 5, 6}}, o);
        INFO(layer->describe() << (accumulate ? " accumulating" : "") << ": " << r.worst_input_error);
        CHECK(r.checked == 270);
        CHECK(r.worst_input_error < 1e-3);  // measured: at most 1.1e-4
      }
      {
        // Times 8: 128 values (2k + 1) / 16 - 8 over [-8, 8], each at least 1/16 from the kinks
        // at -3, 0, 3 and 6, the step (8e-3) well inside that.
        o.batch = 4;
        Widened layer(make(), 8.f);
        const auto r = check_gradients(layer, {Shape{2, 4, 4}}, o);
        INFO(layer.describe() << (accumulate ? " accumulating" : "") << ": " << r.worst_input_error);
        CHECK(r.checked == 128);
        CHECK(r.worst_input_error < 1e-3);  // measured: at most 1.1e-4
      }
    }
  }
}

TEST_CASE("activations in network text: words, slope, round trip and errors", "[activation][network]") {
  const std::string text =
      "conv 4 3 pad=1\nleakyrelu slope=0.2\nconv 4 3 pad=1\nleakyrelu\nrelu6\nsigmoid\ntanh\nsilu\ngelu\n"
      "hardswish\nhardsigmoid\nflatten\ndense 10\n";
  const Network net = parse_network(text, Shape{1, 8, 8}, 10);
  REQUIRE(net.size() == 14);
  const char* names[] = {"leaky_relu", "leaky_relu", "relu6", "sigmoid", "tanh", "silu", "gelu", "hardswish",
                         "hardsigmoid"};
  const int ids[] = {2, 4, 5, 6, 7, 8, 9, 10, 11};
  for (int k = 0; k < 9; ++k) {
    CHECK(net.node(ids[k]).layer->type_name() == names[k]);
    CHECK(net.node(ids[k]).shape == Shape{4, 8, 8});
  }
  const auto& leaky = dynamic_cast<const ActivationLayer&>(*net.node(2).layer);
  CHECK(leaky.desc().slope == 0.2f);
  CHECK(leaky.describe() == "leaky_relu slope=0.2");
  CHECK(dynamic_cast<const ActivationLayer&>(*net.node(4).layer).desc().slope == 0.01f);  // PyTorch's default

  const std::string written = network_text(net);
  CHECK(written.find("leakyrelu slope=0.2\n") != std::string::npos);
  CHECK(written.find("leakyrelu\n") != std::string::npos);  // the default is not written
  CHECK(network_text(parse_network(written, Shape{1, 8, 8}, 10)) == written);

  Network built(Shape{2, 5, 5});
  built.add(layers::leaky_relu(-0.25f));
  built.add(layers::gelu());
  built.add(layers::hardswish());
  CHECK(network_text(built) == "leakyrelu slope=-0.25\ngelu\nhardswish\n");

  auto error = [](const std::string& line) {
    try {
      parse_network(line + "\nflatten\ndense 10\n", Shape{1, 4, 4}, 10, "net.txt");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(error("leakyrelu slope=x"), Catch::Contains("net.txt:1") && Catch::Contains("'x'"));
  CHECK_THAT(error("leakyrelu slope=nan"), Catch::Contains("leaky_relu") && Catch::Contains("nan"));
  CHECK_THAT(error("leakyrelu slope=inf"), Catch::Contains("leaky_relu") && Catch::Contains("inf"));
  CHECK_THAT(error("leakyrelu alpha=0.2"), Catch::Contains("slope"));
  CHECK_THAT(error("leakyrelu 0.2"), Catch::Contains("leakyrelu [slope=A]"));
  CHECK_THAT(error("sigmoid 3"), Catch::Contains("expected: sigmoid"));
  CHECK_THAT(error("gelu approximate=tanh"), Catch::Contains("gelu"));
  CHECK_THROWS_WITH(layers::leaky_relu(std::numeric_limits<float>::infinity()), Catch::Contains("leaky_relu"));
  CHECK_THROWS_AS(layers::leaky_relu(std::nanf("")), ConfigError);
}

TEST_CASE("activation layers say what backward reads, and what they cost", "[activation]") {
  struct Expect {
    std::unique_ptr<Layer> layer;
    const char* type;
    bool needs_output;
  };
  Expect cases[] = {{layers::leaky_relu(), "leaky_relu", true},    {layers::leaky_relu(-0.5f), "leaky_relu", false},
                    {layers::leaky_relu(0.f), "leaky_relu", false}, {layers::relu6(), "relu6", true},
                    {layers::sigmoid(), "sigmoid", true},           {layers::tanh(), "tanh", true},
                    {layers::silu(), "silu", false},                {layers::gelu(), "gelu", false},
                    {layers::hardswish(), "hardswish", false},      {layers::hardsigmoid(), "hardsigmoid", true}};
  for (auto& c : cases) {
    Layer& l = *c.layer;
    INFO(l.describe());
    CHECK(l.type_name() == c.type);
    CHECK(l.backward_needs_output() == c.needs_output);
    CHECK(l.backward_needs_input() == !c.needs_output);
    CHECK(l.recomputable());
    CHECK(l.cheap_to_recompute());
    CHECK(l.parameters().empty());
    CHECK(l.saved_floats(8).empty());
    CHECK(l.output_shape({Shape{3, 4, 5}}) == Shape{3, 4, 5});
    const LayerCost cost = l.forward_cost();
    CHECK(cost.bytes == 2 * sizeof(float) * 60);
    CHECK(cost.flops >= 60);
    CHECK(l.commutes_with_max_pooling() == (std::string(c.type) == "relu6"));
  }

  // The max pooling rewrite swaps relu6 only.
  Network net(Shape{1, 8, 8});
  net.add(layers::conv2d(2, 3, 1, 1));
  net.add(layers::relu6());
  net.add(layers::max_pool2d(2));
  net.add(layers::conv2d(2, 3, 1, 1));
  net.add(layers::leaky_relu(0.1f));
  net.add(layers::max_pool2d(2));
  net.add(layers::flatten());
  net.add(layers::dense(3));
  CHECK(net.commute_relu_and_max_pool() == 1);
  CHECK(net.node(2).name == "2:maxpool2d");
  CHECK(net.node(3).name == "3:relu6");
  CHECK(net.node(5).name == "5:leaky_relu");
}
