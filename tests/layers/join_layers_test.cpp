// Concatenation, the element-wise product, upsampling, padding, global max pooling and ceil-mode pooling:
// finite-difference gradient checks, forward values against PyTorch's (computed with torch 1.13
// and written here), and the shapes each refuses.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include <cnnengine/base/error.hpp>
#include <cnnengine/engine/core/network.hpp>
#include "gradient_checker.hpp"
#include <cnnengine/layers/builtin_layers.hpp>
#include "layers/concat.hpp"
#include "layers/multiply.hpp"
#include "layers/pad.hpp"
#include "layers/pool2d.hpp"
#include "layers/relu.hpp"
#include "layers/upsample.hpp"

using namespace cnn;
using cnn::testing::check_gradients;
using cnn::testing::GradientCheckOptions;
using cnn::testing::require_close;

namespace {


// One forward pass of one sample per input (batch 1) on the CPU backend.
std::vector<float> forward(Layer& layer, std::vector<Shape> shapes, std::vector<std::vector<float>> inputs) {
  CpuBackend backend(2);
  const Shape out = layer.output_shape(shapes);
  std::vector<float> y(out.elements(), -99.0f);
  std::vector<Tensor> views;
  for (std::size_t i = 0; i < inputs.size(); ++i) views.push_back(Tensor{inputs[i].data(), shapes[i].batched(1)});
  LayerContext c;
  c.backend = &backend;
  c.batch = 1;
  c.inputs = views;
  c.output = Tensor{y.data(), out.batched(1)};
  layer.forward(c);
  return y;
}

void check_values(const std::vector<float>& got, const std::vector<float>& want, double tolerance = 1e-6) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == Approx(want[i]).margin(tolerance));
  }
}

std::vector<float> iota(std::size_t n, float first = 0.0f) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = first + static_cast<float>(i);
  return v;
}

}  // namespace

TEST_CASE("concat gradients", "[gradients][join]") {
  Concat l;
  SECTION("two images") { require_close(l, {Shape{3, 4, 5}, Shape{2, 4, 5}}); }
  SECTION("three images") { require_close(l, {Shape{1, 3, 3}, Shape{4, 3, 3}, Shape{2, 3, 3}}); }
  SECTION("three flat inputs") { require_close(l, {Shape{5}, Shape{3}, Shape{4}}); }
}

// concat x x: forward reads one buffer twice, backward writes the first gradient and adds the
// second (as the engine asks), which must give twice the range's sum.
TEST_CASE("concat of one input twice has the gradient of both uses", "[gradients][join]") {
  Concat layer;
  const Shape x_shape{2, 3, 2};
  const int batch = 2;
  REQUIRE(layer.output_shape({x_shape, x_shape}) == Shape{4, 3, 2});
  CpuBackend backend(2);
  std::vector<float> x = iota(x_shape.elements() * batch, -5.0f), y(2 * x.size());
  std::vector<float> r(y.size());
  for (std::size_t i = 0; i < r.size(); ++i) r[i] = std::sin(static_cast<float>(i));
  const Tensor xt{x.data(), x_shape.batched(batch)};
  const Tensor inputs[] = {xt, xt};
  LayerContext c;
  c.backend = &backend;
  c.batch = batch;
  c.inputs = inputs;
  c.output = Tensor{y.data(), Shape{4, 3, 2}.batched(batch)};
  layer.forward(c);
  for (int n = 0; n < batch; ++n)
    for (int k = 0; k < 12; ++k) {
      CHECK(y[n * 24 + k] == x[n * 12 + k]);
      CHECK(y[n * 24 + 12 + k] == x[n * 12 + k]);
    }
  std::vector<float> dx(x.size(), 7.0f);
  const Tensor dxt{dx.data(), xt.shape};
  const Tensor grads[] = {dxt, dxt};
  const bool accumulate[] = {false, true};
  c.grad_output = Tensor{r.data(), c.output.shape};
  c.grad_inputs = grads;
  c.accumulate = accumulate;
  layer.backward(c);
  for (int n = 0; n < batch; ++n)
    for (int k = 0; k < 12; ++k) CHECK(dx[n * 12 + k] == Approx(r[n * 24 + k] + r[n * 24 + 12 + k]));
}

TEST_CASE("multiply gradients", "[gradients][join]") {
  Multiply l;
  SECTION("same shapes") { require_close(l, {Shape{3, 4, 5}, Shape{3, 4, 5}}); }
  SECTION("flat") { require_close(l, {Shape{7}, Shape{7}}); }
  SECTION("a gate per channel") { require_close(l, {Shape{3, 4, 5}, Shape{3, 1, 1}}); }
  SECTION("a gate per channel over wide planes") { require_close(l, {Shape{2, 5, 9}, Shape{2, 1, 1}}); }
  SECTION("the gate first") { require_close(l, {Shape{3, 1, 1}, Shape{3, 4, 5}}); }
}

TEST_CASE("upsample gradients", "[gradients][join]") {
  for (UpsampleMode mode : {UpsampleMode::nearest, UpsampleMode::bilinear})
    for (int factor : {1, 2, 3}) {
      Upsample l(factor, mode);
      require_close(l, {Shape{2, 4, 5}});
      require_close(l, {Shape{1, 1, 1}});
      require_close(l, {Shape{2, 3, 1}});
    }
}

TEST_CASE("global max pooling and ceil-mode pooling gradients", "[gradients][join]") {
  GradientCheckOptions o;
  o.step = 1e-3f;
  SECTION("global max") {
    Pool2D l = Pool2D::global_max();
    require_close(l, {Shape{4, 5, 3}}, o);
  }
  SECTION("max 2x2 ceil over odd sizes") { Pool2D l(PoolMode::max, 2, 2, 0, true); require_close(l, {Shape{2, 5, 7}}, o); }
  SECTION("max 2x2 ceil, wide odd rows") { Pool2D l(PoolMode::max, 2, 2, 0, true); require_close(l, {Shape{2, 3, 19}}, o); }
  SECTION("max 3x3 stride 2 ceil") { Pool2D l(PoolMode::max, 3, 2, 0, true); require_close(l, {Shape{2, 8, 6}}, o); }
  SECTION("max 3x3 stride 2 pad 1 ceil") { Pool2D l(PoolMode::max, 3, 2, 1, true); require_close(l, {Shape{2, 6, 7}}, o); }
  SECTION("average 2x2 ceil") { Pool2D l(PoolMode::average, 2, 2, 0, true); require_close(l, {Shape{2, 5, 5}}, o); }
  SECTION("average 3x3 stride 2 pad 1 ceil") {
    Pool2D l(PoolMode::average, 3, 2, 1, true);
    require_close(l, {Shape{2, 6, 8}}, o);
  }
}

TEST_CASE("concat puts each input's channels after the one before, sample by sample", "[join]") {
  Concat layer;
  const Shape a{1, 2, 2}, b{2, 2, 2};
  const auto y = forward(layer, {a, b}, {iota(4), iota(8, 10.0f)});
  check_values(y, {0, 1, 2, 3, 10, 11, 12, 13, 14, 15, 16, 17});
  Concat flat;
  CHECK(flat.output_shape({Shape{3}, Shape{2}, Shape{1}}) == Shape{6});
  check_values(forward(flat, {Shape{3}, Shape{2}, Shape{1}}, {{1, 2, 3}, {4, 5}, {6}}), {1, 2, 3, 4, 5, 6});
}

TEST_CASE("concat refuses inputs of another height, width or rank, naming both", "[join]") {
  Concat layer;
  CHECK_THROWS_AS(layer.output_shape({Shape{3, 4, 4}, Shape{3, 4, 5}}), ShapeError);
  CHECK_THROWS_WITH(layer.output_shape({Shape{3, 4, 4}, Shape{3, 5, 4}}),
                    Catch::Contains("concat") && Catch::Contains("3x4x4") && Catch::Contains("3x5x4"));
  CHECK_THROWS_AS(layer.output_shape({Shape{3, 4, 4}, Shape{48}}), ShapeError);
  CHECK_THROWS_AS(layer.output_shape({Shape{3, 4, 4}}), ShapeError);
  CHECK(layer.input_count() == 0);
  Network net(Shape{1, 8, 8});
  net.add(layers::conv2d(4, 3));  // 4x6x6
  CHECK_THROWS_WITH(net.add(layers::concat(), {0, 1}), Catch::Contains("layer 2") && Catch::Contains("1x8x8") &&
                                                            Catch::Contains("4x6x6"));
  CHECK_THROWS_WITH(net.add(layers::concat(), {1}), Catch::Contains("two or more"));
  CHECK(net.add(layers::concat(), {1, 1, 1}) == 2);
  CHECK(net.node(2).shape == Shape{12, 6, 6});
}

TEST_CASE("multiply scales by the same element or by the channel's factor", "[join]") {
  Multiply layer;
  check_values(forward(layer, {Shape{1, 2, 2}, Shape{1, 2, 2}}, {{1, 2, 3, 4}, {2, 0.5f, -1, 0}}), {2, 1, -3, 0});
  check_values(forward(layer, {Shape{2, 1, 3}, Shape{2, 1, 1}}, {{1, 2, 3, 4, 5, 6}, {10, -1}}),
               {10, 20, 30, -4, -5, -6});
  CHECK_THROWS_WITH(layer.output_shape({Shape{2, 3, 3}, Shape{2, 3, 1}}),
                    Catch::Contains("multiply") && Catch::Contains("2x3x3") && Catch::Contains("2x3x1"));
  CHECK_THROWS_AS(layer.output_shape({Shape{2, 3, 3}, Shape{3, 1, 1}}), ShapeError);
  // The gate may come first, as PyTorch's broadcasting allows (sigmoid, then "mul features").
  check_values(forward(layer, {Shape{2, 1, 1}, Shape{2, 1, 3}}, {{10, -1}, {1, 2, 3, 4, 5, 6}}),
               {10, 20, 30, -4, -5, -6});
  CHECK(layer.output_shape({Shape{2, 1, 1}, Shape{2, 3, 3}}) == Shape{2, 3, 3});
  CHECK_THROWS_AS(layer.output_shape({Shape{3, 1, 1}, Shape{2, 3, 3}}), ShapeError);
  CHECK_THROWS_AS(layer.output_shape({Shape{6}, Shape{3}}), ShapeError);
  CHECK(layer.backward_needs_input());
}

TEST_CASE("pad gradients", "[gradients][join]") {
  SECTION("uneven sides") { Pad l(PadDesc{0, 1, 2, 0, 0.0f}); require_close(l, {Shape{2, 4, 5}}); }
  SECTION("every side, a value") { Pad l(PadDesc{1, 1, 1, 1, 0.5f}); require_close(l, {Shape{3, 1, 1}}); }
  SECTION("nothing") { Pad l(PadDesc{}); require_close(l, {Shape{2, 3, 2}}); }
}

TEST_CASE("pad gives F.pad's values, and a max pooling after -inf padding ignores it", "[join]") {
  // F.pad(x, (1, 0, 0, 2), value=7): one column on the left, two rows at the bottom
  Pad l(PadDesc{0, 2, 1, 0, 7.0f});
  check_values(forward(l, {Shape{1, 2, 2}}, {{1, 2, 3, 4}}), {7, 1, 2, 7, 3, 4, 7, 7, 7, 7, 7, 7});
  CHECK(l.output_shape({Shape{3, 2, 2}}) == Shape{3, 4, 3});

  Network net(Shape{1, 2, 3});
  net.add(std::make_unique<Pad>(PadDesc{0, 1, 0, 1, -INFINITY}));
  net.add(layers::max_pool2d(2));
  REQUIRE(net.output_shape() == Shape{1, 1, 2});
  const auto padded = forward(*net.node(1).layer, {Shape{1, 2, 3}}, {{-5, -6, -7, -8, -9, -4}});
  CHECK(padded[3] == -INFINITY);  // the column on the right
  const auto pooled = forward(*net.node(2).layer, {Shape{1, 3, 4}}, {padded});
  check_values(pooled, {-5, -4});  // windows over the input's values alone
}

TEST_CASE("pad refuses a negative side, NaN and a flat input", "[join]") {
  CHECK_THROWS_AS(Pad(PadDesc{-1, 0, 0, 0, 0.0f}), ConfigError);
  CHECK_THROWS_AS(Pad(PadDesc{0, 0, 0, Pad::kMaxPad + 1, 0.0f}), ConfigError);
  CHECK_THROWS_AS(Pad(PadDesc{0, 0, 0, 0, NAN}), ConfigError);
  Pad l(PadDesc{1, 1, 1, 1, 0.0f});
  CHECK_THROWS_AS(l.output_shape({Shape{12}}), ShapeError);
}

TEST_CASE("upsample gives PyTorch's values", "[join]") {
  SECTION("nearest x2 and x3") {
    Upsample x2(2, UpsampleMode::nearest);
    check_values(forward(x2, {Shape{1, 2, 2}}, {{1, 2, 3, 4}}), {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
    Upsample x3(3, UpsampleMode::nearest);
    check_values(forward(x3, {Shape{1, 1, 2}}, {{5, 6}}), {5, 5, 5, 6, 6, 6, 5, 5, 5, 6, 6, 6, 5, 5, 5, 6, 6, 6});
  }
  SECTION("bilinear x2: F.interpolate(scale_factor=2, mode='bilinear', align_corners=False)") {
    Upsample l(2, UpsampleMode::bilinear);
    check_values(forward(l, {Shape{1, 2, 2}}, {{1, 2, 3, 4}}),
                 {1.0f, 1.25f, 1.75f, 2.0f, 1.5f, 1.75f, 2.25f, 2.5f, 2.5f, 2.75f, 3.25f, 3.5f, 3.0f, 3.25f, 3.75f, 4.0f},
                 0);
  }
  SECTION("bilinear x3") {
    Upsample l(3, UpsampleMode::bilinear);
    const std::vector<float> torch = {
        1.0f, 1.0f, -1.1920929e-07f, -1.0f, -1.9999999f, -1.1666665f, -0.33333313f, 0.5f, 0.5f,
        1.0f, 1.0f, -6.953875e-08f, -1.0f, -1.9999998f, -1.1666665f, -0.33333313f, 0.5f, 0.5f,
        1.6666667f, 1.6666667f, 1.1111112f, 0.5555557f, 2.3841858e-07f, 1.6391277e-07f, 5.9604645e-08f, -5.960465e-08f, -5.2154064e-08f,
        2.3333335f, 2.3333335f, 2.2222223f, 2.1111112f, 1.9999999f, 1.1666666f, 0.3333332f, -0.5f, -0.5f,
        3.0f, 3.0f, 3.3333333f, 3.6666665f, 3.9999998f, 2.333333f, 0.6666662f, -1.0f, -0.99999994f,
        3.0f, 3.0f, 3.3333335f, 3.6666665f, 3.9999995f, 2.333333f, 0.66666627f, -1.0f, -1.0f};
    check_values(forward(l, {Shape{1, 2, 3}}, {{1, -2, 0.5f, 3, 4, -1}}), torch, 1e-6);
  }
  SECTION("a wide row crosses the kernel's column chunks") {
    // Each row a ramp: bilinear x2 of a ramp is the ramp at the sample points, clamped at the ends.
    const int w = 2500;
    Upsample l(2, UpsampleMode::bilinear);
    std::vector<float> x(2 * w);
    for (int i = 0; i < 2 * w; ++i) x[i] = static_cast<float>(i % w);
    const auto y = forward(l, {Shape{1, 2, w}}, {x});
    for (int row = 0; row < 4; ++row)
      for (int o = 0; o < 2 * w; ++o) {
        const float want = std::min(std::max(0.5f * static_cast<float>(o) - 0.25f, 0.0f), static_cast<float>(w - 1));
        if (y[row * 2 * w + o] != want) FAIL("row " << row << " column " << o << ": " << y[row * 2 * w + o]);
      }
  }
  Upsample l(2, UpsampleMode::nearest);
  CHECK_THROWS_AS(l.output_shape({Shape{12}}), ShapeError);
  CHECK_THROWS_AS(Upsample(0, UpsampleMode::nearest), ConfigError);
  CHECK(l.output_shape({Shape{3, 5, 7}}) == Shape{3, 10, 14});
}

TEST_CASE("ceil-mode pooling gives PyTorch's sizes and values", "[join]") {
  SECTION("max 2x2 on 5x5") {
    Pool2D l(PoolMode::max, 2, 2, 0, true);
    CHECK(l.output_shape({Shape{1, 5, 5}}) == Shape{1, 3, 3});
    check_values(forward(l, {Shape{1, 5, 5}}, {iota(25)}), {6, 8, 9, 16, 18, 19, 21, 23, 24});
  }
  SECTION("average 2x2 on 5x5: the clipped windows divide by their part inside") {
    Pool2D l(PoolMode::average, 2, 2, 0, true);
    check_values(forward(l, {Shape{1, 5, 5}}, {iota(25)}), {3, 5, 6.5f, 13, 15, 16.5f, 20.5f, 22.5f, 24});
  }
  SECTION("average 3x3 stride 2 pad 1 on 6x6") {
    Pool2D l(PoolMode::average, 3, 2, 1, true);
    CHECK(l.output_shape({Shape{1, 6, 6}}) == Shape{1, 4, 4});
    std::vector<float> x(36);
    for (int i = 0; i < 36; ++i) x[i] = static_cast<float>(i * i % 7);
    check_values(forward(l, {Shape{1, 6, 6}}, {x}),
                 {0.5f, 2.0f, 2.6666667f, 3.0f, 2.0f, 1.3333334f, 2.2222223f, 2.6666667f, 2.6666667f, 2.2222223f,
                  1.3333334f, 1.6666666f, 3.0f, 2.6666667f, 1.6666666f, 0.0f});
  }
  SECTION("PyTorch's sizes, the window that would start in the padding dropped") {
    // ceil((in + 2p - k) / s) + 1, minus one where (out - 1) s >= in + p.
    struct Case {
      int in, k, s, p, want;
    };
    for (const Case c : {Case{5, 2, 2, 0, 3}, Case{4, 2, 2, 0, 2}, Case{6, 3, 2, 1, 4}, Case{28, 3, 2, 0, 14},
                         Case{5, 2, 3, 1, 2}, Case{7, 3, 3, 1, 3}, Case{1, 2, 2, 1, 1}, Case{2, 3, 2, 1, 2}}) {
      INFO(c.in << " window " << c.k << " stride " << c.s << " pad " << c.p);
      Pool2D l(PoolMode::max, c.k, c.s, c.p, true);
      CHECK(l.output_shape({Shape{1, c.in, c.in}}) == Shape{1, c.want, c.want});
    }
  }
  SECTION("the text form and the floor form") {
    Pool2D floor(PoolMode::max, 2);
    CHECK(floor.output_shape({Shape{1, 5, 5}}) == Shape{1, 2, 2});
    CHECK_FALSE(floor.ceil_mode());
    CHECK(Pool2D(PoolMode::max, 2, 2, 0, true).describe().find("ceil") != std::string::npos);
    CHECK(layers::max_pool2d(2, 0, 0, true)->output_shape({Shape{1, 5, 5}}) == Shape{1, 3, 3});
    CHECK(layers::avg_pool2d(2, 0, 0, true)->output_shape({Shape{1, 5, 5}}) == Shape{1, 3, 3});
  }
}

TEST_CASE("global max pooling takes each channel's largest value and commutes with relu", "[join]") {
  Pool2D l = Pool2D::global_max();
  CHECK(l.type_name() == "global_maxpool");
  CHECK(l.is_max_pooling());
  CHECK(l.output_shape({Shape{2, 3, 2}}) == Shape{2, 1, 1});
  check_values(forward(l, {Shape{2, 3, 2}}, {{1, 9, -3, 4, 2, 0, -5, -1, -7, -2, -9, -3}}), {9, -1});
  CHECK(layers::global_max_pool2d()->type_name() == "global_maxpool");

  Network net(Shape{3, 6, 6});
  net.add(layers::relu());
  net.add(layers::global_max_pool2d());
  net.add(layers::flatten());
  CHECK(net.commute_relu_and_max_pool() == 1);
  CHECK(net.node(1).name == "1:global_maxpool");
  CHECK(net.node(1).shape == Shape{3, 1, 1});
  CHECK(net.node(2).name == "2:relu");
}

TEST_CASE("the joining layers' memory and recomputation", "[join]") {
  Concat concat;
  concat.output_shape({Shape{2, 3, 3}, Shape{1, 3, 3}});
  CHECK(concat.saved_floats(4).empty());
  CHECK_FALSE(concat.backward_needs_input());
  CHECK_FALSE(concat.backward_needs_output());
  CHECK(concat.recomputable());
  CHECK(concat.cheap_to_recompute());
  Multiply mul;
  CHECK(mul.saved_floats(4).empty());
  CHECK(mul.backward_needs_input());
  CHECK_FALSE(mul.backward_needs_output());
  CHECK(mul.cheap_to_recompute());
  Upsample up(2, UpsampleMode::bilinear);
  up.output_shape({Shape{2, 3, 3}});
  CHECK_FALSE(up.backward_needs_input());
  CHECK_FALSE(up.backward_needs_output());
  CHECK(up.cheap_to_recompute());
  CHECK(up.forward_cost().bytes == Approx(4.0 * (18 + 72)));
}
