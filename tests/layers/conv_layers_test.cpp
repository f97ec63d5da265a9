// The convolution layers beyond the plain one: grouped, dilated, depthwise (dwconv) and
// transposed (deconv). Finite-difference gradient checks on the CPU backend, the forward pass
// against naive loops written from PyTorch's definitions (and the CPU's convolution forward call
// adding into its output), output shapes, refusals and the transposed convolution's workspace.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include <cnnengine/base/error.hpp>
#include "gradient_checker.hpp"
#include <cnnengine/layers/builtin_layers.hpp>
#include "layers/conv2d.hpp"
#include "layers/conv_transpose2d.hpp"
#include <cnnengine/layers/registry.hpp>
#include "memory/buffer.hpp"
#include "memory/host_resource.hpp"

using namespace cnn;
using cnn::testing::check_gradients;
using cnn::testing::GradientCheckOptions;
using cnn::testing::require_close;

namespace {


layers::ConvOptions options(int stride, int padding, int dilation, int groups, bool bias = true) {
  layers::ConvOptions o;
  o.stride = stride;
  o.padding = padding;
  o.dilation = dilation;
  o.groups = groups;
  o.bias = bias;
  return o;
}

std::vector<float> random_values(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = u(gen);
  return v;
}

// The layer's forward pass on the CPU backend, with the given parameters.
std::vector<float> run_forward(Layer& layer, const Shape& in, int batch, const std::vector<float>& x,
                               std::vector<std::vector<float>>& params, int threads = 2) {
  CpuBackend backend(threads);
  const Shape out = layer.output_shape({in});
  const auto specs = layer.parameters();
  params.resize(specs.size());
  std::vector<Tensor> param_tensors;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    if (params[i].empty()) params[i] = random_values(specs[i].shape.elements(), 40 + static_cast<unsigned>(i));
    param_tensors.push_back(Tensor{params[i].data(), specs[i].shape});
  }
  std::vector<float> input = x, output(static_cast<std::size_t>(batch) * out.elements(), 7.f);
  const std::size_t ws_bytes = layer.workspace_bytes(backend, batch, ConvPass::forward, 1 << 30);
  memory::Buffer ws(memory::host_resource(), std::max<std::size_t>(ws_bytes, 1), memory::Category::workspace);
  const Tensor inputs[1] = {Tensor{input.data(), in.batched(batch)}};
  LayerContext c;
  c.backend = &backend;
  c.batch = batch;
  c.inputs = inputs;
  c.output = Tensor{output.data(), out.batched(batch)};
  c.params = param_tensors;
  c.workspace = Workspace{ws.data(), ws_bytes};
  layer.forward(c);
  return output;
}

// PyTorch's Conv2d, written out: x [N, C, H, W], w [K, C / groups, kh, kw].
std::vector<float> naive_conv(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>* bias,
                              int N, int C, int H, int W, int K, int k, int stride, int pad, int dilation, int groups,
                              int HO, int WO) {
  std::vector<float> y(static_cast<std::size_t>(N) * K * HO * WO);
  const int cg = C / groups, kg = K / groups;
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < K; ++o)
      for (int oh = 0; oh < HO; ++oh)
        for (int ow = 0; ow < WO; ++ow) {
          double sum = bias ? (*bias)[static_cast<std::size_t>(o)] : 0.0;
          const int g = o / kg;
          for (int ci = 0; ci < cg; ++ci)
            for (int ki = 0; ki < k; ++ki)
              for (int kj = 0; kj < k; ++kj) {
                const int ih = oh * stride - pad + ki * dilation, iw = ow * stride - pad + kj * dilation;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                const int c = g * cg + ci;
                sum += static_cast<double>(x[((static_cast<std::size_t>(n) * C + c) * H + ih) * W + iw]) *
                       w[((static_cast<std::size_t>(o) * cg + ci) * k + ki) * k + kj];
              }
          y[((static_cast<std::size_t>(n) * K + o) * HO + oh) * WO + ow] = static_cast<float>(sum);
        }
  return y;
}

// PyTorch's ConvTranspose2d, written out: x [N, C, H, W], w [C, K, k, k]; each input pixel
// scatters its kernel into the output.
std::vector<float> naive_deconv(const std::vector<float>& x, const std::vector<float>& w,
                                const std::vector<float>* bias, int N, int C, int H, int W, int K, int k, int stride,
                                int pad, int HO, int WO) {
  std::vector<double> y(static_cast<std::size_t>(N) * K * HO * WO, 0.0);
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int ih = 0; ih < H; ++ih)
        for (int iw = 0; iw < W; ++iw)
          for (int o = 0; o < K; ++o)
            for (int ki = 0; ki < k; ++ki)
              for (int kj = 0; kj < k; ++kj) {
                const int oh = ih * stride - pad + ki, ow = iw * stride - pad + kj;
                if (oh < 0 || oh >= HO || ow < 0 || ow >= WO) continue;
                y[((static_cast<std::size_t>(n) * K + o) * HO + oh) * WO + ow] +=
                    static_cast<double>(x[((static_cast<std::size_t>(n) * C + c) * H + ih) * W + iw]) *
                    w[((static_cast<std::size_t>(c) * K + o) * k + ki) * k + kj];
              }
  std::vector<float> out(y.size());
  for (std::size_t i = 0; i < y.size(); ++i)
    out[i] = static_cast<float>(y[i] + (bias ? (*bias)[i / (static_cast<std::size_t>(HO) * WO) % K] : 0.0));
  return out;
}

double worst_difference(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
  return worst;
}

}  // namespace

TEST_CASE("grouped and dilated conv2d gradients", "[gradients][conv]") {
  SECTION("3x3, groups 2, padding 1") {
    Conv2D l(6, 3, options(1, 1, 1, 2));
    require_close(l, {Shape{4, 6, 5}});
  }
  SECTION("3x3, groups 3, stride 2, no bias") {
    Conv2D l(3, 3, options(2, 1, 1, 3, false));
    require_close(l, {Shape{6, 7, 7}});
  }
  SECTION("1x1, groups 2 (pointwise)") {
    Conv2D l(4, 1, options(1, 0, 1, 2));
    require_close(l, {Shape{6, 4, 3}});
  }
  SECTION("3x3, dilation 2, padding 2 (same size)") {
    Conv2D l(4, 3, options(1, 2, 2, 1));
    require_close(l, {Shape{3, 7, 6}});
  }
  SECTION("3x3, dilation 2, stride 2, no padding") {
    Conv2D l(3, 3, options(2, 0, 2, 1));
    require_close(l, {Shape{2, 9, 8}});
  }
  SECTION("3x3, dilation 3, groups 2") {
    Conv2D l(4, 3, options(1, 1, 3, 2));
    require_close(l, {Shape{2, 8, 9}});
  }
}

TEST_CASE("conv2d gradients where backward-data is a forward convolution of dy and where it is not",
          "[gradients][conv]") {
  // At stride 1 the CPU computes dx as dy convolved with the turned weights, padded by
  // dilation (k - 1) - pad (Note [Backward-data as a convolution], backends/cpu/cpu_conv.cpp).
  SECTION("3x3, no padding: dy padded by 2, wider than the image's rows") {
    Conv2D l(5, 3, options(1, 0, 1, 1));
    require_close(l, {Shape{3, 7, 9}});
  }
  SECTION("5x5, padding 1: dy padded by 3") {
    Conv2D l(2, 5, options(1, 1, 1, 1));
    require_close(l, {Shape{3, 8, 7}});
  }
  SECTION("3x3, padding 3: beyond the kernel's reach, col2im") {
    Conv2D l(3, 3, options(1, 3, 1, 1));
    require_close(l, {Shape{2, 5, 6}});
  }
  SECTION("3x3, dilation 2, no padding, groups 2 at stride 2: col2im") {
    Conv2D l(4, 3, options(2, 0, 2, 2));
    require_close(l, {Shape{4, 9, 9}});
  }
}

TEST_CASE("depthwise conv2d gradients", "[gradients][conv]") {
  SECTION("3x3 stride 1 padding 1") {
    Conv2D l = Conv2D::depthwise(3, options(1, 1, 1, 1));
    require_close(l, {Shape{4, 6, 7}});
  }
  SECTION("3x3 stride 2 padding 1") {
    Conv2D l = Conv2D::depthwise(3, options(2, 1, 1, 1));
    require_close(l, {Shape{3, 8, 8}});
  }
  SECTION("3x3 stride 2 padding 1, odd sizes") {
    Conv2D l = Conv2D::depthwise(3, options(2, 1, 1, 1));
    require_close(l, {Shape{3, 7, 9}});
  }
  SECTION("3x3 stride 1 padding 1, a row of one and two") {
    Conv2D l = Conv2D::depthwise(3, options(1, 1, 1, 1));
    require_close(l, {Shape{2, 5, 1}});
    require_close(l, {Shape{2, 2, 5}});
  }
  SECTION("5x5 stride 1 padding 2, no bias, wide rows") {
    Conv2D l = Conv2D::depthwise(5, options(1, 2, 1, 1, false));
    require_close(l, {Shape{2, 5, 21}});
  }
  SECTION("3x3 dilation 2 padding 2") {
    Conv2D l = Conv2D::depthwise(3, options(1, 2, 2, 1));
    require_close(l, {Shape{3, 7, 6}});
  }
  SECTION("3x3 stride 3 no padding, odd sizes") {
    Conv2D l = Conv2D::depthwise(3, options(3, 0, 1, 1));
    require_close(l, {Shape{2, 10, 11}});
  }
}

TEST_CASE("conv_transpose2d gradients", "[gradients][conv]") {
  SECTION("2x2 stride 2") {
    ConvTranspose2D l(3, 2, 2);
    require_close(l, {Shape{4, 3, 4}});
  }
  SECTION("3x3 stride 2 padding 1 output_pad 1") {
    ConvTranspose2D l(2, 3, 2, 1, 1);
    require_close(l, {Shape{3, 4, 5}});
  }
  SECTION("3x3 stride 1 padding 1, no bias") {
    ConvTranspose2D l(4, 3, 1, 1, 0, false);
    require_close(l, {Shape{2, 5, 4}});
  }
  SECTION("4x4 stride 3 output_pad 2, no bias") {
    ConvTranspose2D l(2, 4, 3, 0, 2, false);
    require_close(l, {Shape{2, 3, 3}});
  }
}

TEST_CASE("grouped, dilated and depthwise forward passes match PyTorch's definition", "[conv]") {
  struct Case {
    const char* name;
    int C, H, W, K, k, stride, pad, dilation, groups;
    bool depthwise;
  };
  const Case cases[] = {
      {"grouped 3x3", 8, 9, 7, 12, 3, 1, 1, 1, 4, false},
      {"grouped 3x3 stride 2", 6, 11, 10, 9, 3, 2, 1, 1, 3, false},
      {"dilated 3x3", 3, 12, 11, 5, 3, 1, 2, 2, 1, false},
      {"dilated grouped 5x5 stride 2", 4, 17, 15, 4, 5, 2, 3, 2, 2, false},
      {"grouped with a channel multiplier (groups = in)", 3, 6, 6, 6, 3, 1, 1, 1, 3, false},
      {"depthwise 3x3", 5, 13, 17, 5, 3, 1, 1, 1, 5, true},
      {"depthwise 3x3 stride 2", 4, 14, 15, 4, 3, 2, 1, 1, 4, true},
      {"depthwise 3x3 stride 2, odd", 3, 7, 9, 3, 3, 2, 1, 1, 3, true},
      {"depthwise 5x5 stride 2 padding 2", 3, 12, 40, 3, 5, 2, 2, 1, 3, true},
      {"depthwise 7x7 dilation 2", 2, 20, 19, 2, 7, 1, 6, 2, 2, true},
      {"depthwise 3x3 no padding", 2, 6, 33, 2, 3, 1, 0, 1, 2, true},
  };
  for (const Case& t : cases) {
    INFO(t.name);
    const int N = 3;
    Conv2D layer = t.depthwise ? Conv2D::depthwise(t.k, options(t.stride, t.pad, t.dilation, 1))
                               : Conv2D(t.K, t.k, options(t.stride, t.pad, t.dilation, t.groups));
    const Shape in{t.C, t.H, t.W};
    const Shape out = layer.output_shape({in});
    const int HO = (t.H + 2 * t.pad - t.dilation * (t.k - 1) - 1) / t.stride + 1;
    const int WO = (t.W + 2 * t.pad - t.dilation * (t.k - 1) - 1) / t.stride + 1;
    REQUIRE(out == Shape{t.K, HO, WO});
    const std::vector<float> x = random_values(static_cast<std::size_t>(N) * in.elements(), 3);
    for (int threads : {1, 2, 3}) {
      std::vector<std::vector<float>> params;
      const std::vector<float> y = run_forward(layer, in, N, x, params, threads);
      REQUIRE(params[0].size() == static_cast<std::size_t>(t.K) * (t.C / t.groups) * t.k * t.k);
      const auto expected =
          naive_conv(x, params[0], &params[1], N, t.C, t.H, t.W, t.K, t.k, t.stride, t.pad, t.dilation, t.groups, HO, WO);
      CHECK(worst_difference(y, expected) < 1e-4);
    }
  }
}

TEST_CASE("conv_transpose2d's forward pass matches PyTorch's definition", "[conv]") {
  struct Case {
    int C, H, W, K, k, stride, pad, output_pad;
  };
  for (const Case& t : {Case{3, 4, 5, 2, 2, 2, 0, 0}, Case{4, 5, 3, 3, 3, 2, 1, 1}, Case{2, 6, 6, 5, 3, 1, 1, 0},
                        Case{3, 3, 4, 2, 5, 3, 2, 2}, Case{1, 4, 4, 1, 3, 2, 1, 1}}) {
    INFO("deconv " << t.K << " " << t.k << " stride " << t.stride << " pad " << t.pad << " output_pad " << t.output_pad);
    ConvTranspose2D layer(t.K, t.k, t.stride, t.pad, t.output_pad);
    const Shape in{t.C, t.H, t.W};
    const int HO = (t.H - 1) * t.stride - 2 * t.pad + t.k + t.output_pad;
    const int WO = (t.W - 1) * t.stride - 2 * t.pad + t.k + t.output_pad;
    REQUIRE(layer.output_shape({in}) == Shape{t.K, HO, WO});
    const std::vector<float> x = random_values(2 * in.elements(), 5);
    std::vector<std::vector<float>> params;
    const std::vector<float> y = run_forward(layer, in, 2, x, params);
    REQUIRE(layer.parameters()[0].shape == Shape{t.C, t.K, t.k, t.k});
    CHECK(worst_difference(y, naive_deconv(x, params[0], &params[1], 2, t.C, t.H, t.W, t.K, t.k, t.stride, t.pad, HO,
                                           WO)) < 1e-4);
  }
}

TEST_CASE("the depthwise filter gradient gives the same bits on every run", "[conv]") {
  CpuBackend one(3), three(3);
  Conv2dDesc d;
  d.in_channels = d.out_channels = d.groups = 5;
  d.kernel_h = d.kernel_w = 3;
  d.stride = 2;
  d.padding = 1;
  const Shape xs{4, 5, 9, 10}, ys{4, 5, 5, 5};
  std::vector<float> x = random_values(xs.elements(), 1), dy = random_values(ys.elements(), 2);
  auto filter_gradient = [&](CpuBackend& backend) {
    std::vector<float> dw(45, 0.f), db(5, 0.f);
    const std::size_t bytes = backend.conv2d_workspace_bytes(d, xs, ys, ConvPass::backward, 0);
    std::vector<float> ws(bytes / sizeof(float) + 1);
    backend.conv2d_backward_filter(d, Tensor{x.data(), xs}, Tensor{dy.data(), ys}, Tensor{dw.data(), Shape{5, 1, 3, 3}},
                                   Tensor{db.data(), Shape{5}}, Workspace{ws.data(), bytes});
    dw.insert(dw.end(), db.begin(), db.end());
    return dw;
  };
  CHECK(filter_gradient(one) == filter_gradient(three));
  // Forward: per range of (image, 16-channel block) (3 threads, 4 blocks), the zero-padded block
  // (9 + 2) x (10 + 2) x 16 and the output block 5 x 5 x 16.
  CHECK(one.conv2d_workspace_bytes(d, xs, ys, ConvPass::forward, 0) == 3 * 2512 * sizeof(float));
  std::vector<float> y(ys.elements()), w = random_values(45, 3);
  CHECK_THROWS_AS(one.conv2d_forward(d, Tensor{x.data(), xs}, Tensor{w.data(), Shape{5, 1, 3, 3}}, Tensor{},
                                     Tensor{y.data(), ys}, false, Workspace{y.data(), 16}),
                  std::logic_error);
}

TEST_CASE("convolution layers' shapes, parameters and refusals", "[conv][layers]") {
  SECTION("grouped weights are [out, in / groups, k, k], He-initialised over in / groups") {
    Conv2D l(8, 3, options(1, 1, 1, 4));
    CHECK(l.output_shape({Shape{12, 10, 10}}) == Shape{8, 10, 10});
    CHECK(l.parameters()[0].shape == Shape{8, 3, 3, 3});
    CHECK(l.parameters()[0].fan_in == 27);
    CHECK(l.type_name() == "conv2d");
  }
  SECTION("dilation widens the kernel's reach") {
    Conv2D l(2, 3, options(1, 0, 2, 1));
    CHECK(l.output_shape({Shape{1, 10, 9}}) == Shape{2, 6, 5});
    CHECK_THROWS_AS(l.output_shape({Shape{1, 4, 9}}), ShapeError);
  }
  SECTION("depthwise keeps the channels and has a filter per channel") {
    Conv2D l = Conv2D::depthwise(3, options(2, 1, 1, 1));
    CHECK(l.output_shape({Shape{32, 112, 112}}) == Shape{32, 56, 56});
    CHECK(l.parameters()[0].shape == Shape{32, 1, 3, 3});
    CHECK(l.parameters()[1].shape == Shape{32});
    CHECK(l.desc().groups == 32);
    CHECK(l.type_name() == "depthwise_conv2d");
    CHECK(layer_type_of(l)->word == "dwconv");
    CHECK(layer_type_of(Conv2D(4, 3))->word == "conv");
  }
  SECTION("pad=same") {
    Conv2D l(4, 5, options(1, 0, 2, 1), true);
    CHECK(l.desc().padding == 4);
    CHECK(l.output_shape({Shape{2, 9, 11}}) == Shape{4, 9, 11});
    CHECK_THROWS_WITH(Conv2D(4, 4, options(1, 0, 1, 1), true), Catch::Contains("pad=same needs an odd kernel"));
    CHECK_THROWS_WITH(Conv2D(4, 3, options(2, 0, 1, 1), true), Catch::Contains("stride 2"));
  }
  SECTION("groups must divide both channel counts") {
    Conv2D l(6, 3, options(1, 1, 1, 3));
    CHECK_THROWS_AS(l.output_shape({Shape{4, 8, 8}}), ShapeError);
    CHECK_THROWS_WITH(l.output_shape({Shape{4, 8, 8}}),
                      Catch::Contains("conv2d") && Catch::Contains("4 input channels") &&
                          Catch::Contains("6 output channels"));
    Conv2D odd(4, 3, options(1, 1, 1, 3));
    CHECK_THROWS_AS(odd.output_shape({Shape{6, 8, 8}}), ShapeError);
  }
  SECTION("groups and dilation must be positive") {
    CHECK_THROWS_WITH(Conv2D(4, 3, options(1, 1, 1, 0)), Catch::Contains("groups=0"));
    CHECK_THROWS_WITH(Conv2D(4, 3, options(1, 1, 0, 1)), Catch::Contains("dilation=0"));
    CHECK_THROWS_AS(layers::depthwise_conv2d(3, 1, 1, -1), ConfigError);
  }
  SECTION("deconv: output size, weights [in, out, k, k], output_pad below the stride") {
    ConvTranspose2D l(32, 2, 2);
    CHECK(l.output_shape({Shape{64, 28, 28}}) == Shape{32, 56, 56});
    CHECK(l.parameters()[0].shape == Shape{64, 32, 2, 2});
    CHECK(l.type_name() == "conv_transpose2d");
    CHECK(layer_type_of(l)->word == "deconv");
    ConvTranspose2D p(3, 3, 2, 1, 1);
    CHECK(p.output_shape({Shape{2, 7, 5}}) == Shape{3, 14, 10});
    CHECK_THROWS_WITH(ConvTranspose2D(3, 3, 2, 1, 2), Catch::Contains("output_pad=2"));
    CHECK_THROWS_AS(ConvTranspose2D(3, 3, 1, 0, 1), ConfigError);
    CHECK_THROWS_AS(ConvTranspose2D(0, 3), ConfigError);
    ConvTranspose2D shrinking(3, 1, 1, 2);  // (4 - 1) - 4 + 1 = 0 pixels
    CHECK_THROWS_AS(shrinking.output_shape({Shape{2, 4, 4}}), ShapeError);
  }
  SECTION("the factories") {
    CHECK(layers::conv2d(8, 3, options(1, 1, 2, 2))->describe() == "conv2d 3x3/8 stride 1 pad 1 dilation 2 groups 2");
    CHECK(layers::depthwise_conv2d(3, 2, 1)->type_name() == "depthwise_conv2d");
    CHECK(layers::conv_transpose2d(4, 2, 2)->type_name() == "conv_transpose2d");
  }
}

TEST_CASE("conv_transpose2d's workspace is what the convolution calls it makes ask", "[conv][layers]") {
  CpuBackend backend(2);
  ConvTranspose2D l(8, 3, 2, 1, 1);
  l.output_shape({Shape{4, 6, 6}});
  const Conv2dDesc& d = l.adjoint();
  CHECK(d.in_channels == 8);
  CHECK(d.out_channels == 4);
  const Shape x{5, 8, 12, 12}, y{5, 4, 6, 6};
  CHECK(l.workspace_bytes(backend, 5, ConvPass::forward, 1 << 30) ==
        backend.conv2d_workspace_bytes(d, x, y, ConvPass::backward, 1 << 30));
  const std::size_t conv = std::max(backend.conv2d_workspace_bytes(d, x, y, ConvPass::forward, 1 << 30),
                                    backend.conv2d_workspace_bytes(d, x, y, ConvPass::backward, 1 << 30));
  // and nothing for dx: the forward call adds it to the input gradient itself
  CHECK(l.workspace_bytes(backend, 5, ConvPass::backward, 1 << 30) == conv);
}

TEST_CASE("conv_transpose2d's backward adds its input gradient within its own workspace", "[conv][layers]") {
  for (int threads : {1, 3}) {
    CpuBackend backend(threads);
    ConvTranspose2D l(3, 3, 2, 1, 1);
    const Shape in{4, 5, 6};
    const Shape out = l.output_shape({in});
    const int N = 3;
    const std::size_t bytes = l.workspace_bytes(backend, N, ConvPass::backward, 1 << 30);
    std::vector<float> x = random_values(N * in.elements(), 1), dy = random_values(N * out.elements(), 2);
    std::vector<float> w = random_values(l.parameters()[0].shape.elements(), 3), b(3, 0.f);
    auto input_gradient = [&](bool accumulate, std::vector<float> dx) {
      std::vector<float> dw(w.size(), 0.f), db(b.size(), 0.f);
      // exactly the planned bytes, 64-byte aligned, inside a buffer guarded by a known pattern
      memory::Buffer ws(memory::host_resource(), bytes + 64, memory::Category::workspace);
      float* guard = static_cast<float*>(ws.data()) + bytes / sizeof(float);
      std::fill(guard, guard + 16, 123.f);
      const Tensor inputs[1] = {Tensor{x.data(), in.batched(N)}};
      const Tensor params[2] = {Tensor{w.data(), l.parameters()[0].shape}, Tensor{b.data(), Shape{3}}};
      const Tensor grads[2] = {Tensor{dw.data(), l.parameters()[0].shape}, Tensor{db.data(), Shape{3}}};
      const Tensor grad_inputs[1] = {Tensor{dx.data(), in.batched(N)}};
      const bool acc[1] = {accumulate};
      LayerContext c;
      c.backend = &backend;
      c.batch = N;
      c.inputs = inputs;
      c.params = params;
      c.grads = grads;
      c.grad_output = Tensor{dy.data(), out.batched(N)};
      c.grad_inputs = grad_inputs;
      c.accumulate = acc;
      c.workspace = Workspace{ws.data(), bytes};
      l.backward(c);
      CHECK(std::all_of(guard, guard + 16, [](float v) { return v == 123.f; }));
      return dx;
    };
    const std::vector<float> prefill = random_values(N * in.elements(), 4);
    const std::vector<float> alone = input_gradient(false, std::vector<float>(prefill.size(), 9.f));
    const std::vector<float> added = input_gradient(true, prefill);
    std::vector<float> expected(prefill.size());
    for (std::size_t i = 0; i < expected.size(); ++i) expected[i] = prefill[i] + alone[i];
    CHECK(worst_difference(added, expected) < 1e-5);
  }
}

TEST_CASE("conv2d_forward with accumulate adds the convolution (and bias) to y", "[conv][cpu]") {
  struct Case {
    const char* name;
    int C, H, W, K, k, stride, pad, dilation, groups;
  };
  const Case cases[] = {
      {"plain 3x3 padding 1", 3, 7, 6, 4, 3, 1, 1, 1, 1},
      {"plain 3x3 stride 2", 3, 9, 8, 5, 3, 2, 1, 1, 1},
      {"grouped 3x3", 6, 7, 5, 4, 3, 1, 1, 1, 2},
      {"pointwise", 5, 6, 7, 3, 1, 1, 0, 1, 1},
      {"grouped pointwise", 4, 5, 5, 6, 1, 1, 0, 1, 2},
      {"depthwise 3x3", 4, 8, 9, 4, 3, 1, 1, 1, 4},
      {"depthwise 3x3 stride 2", 3, 9, 10, 3, 3, 2, 1, 1, 3},
      {"depthwise 5x5", 2, 9, 8, 2, 5, 1, 2, 1, 2},
      {"depthwise 5x5 stride 2", 2, 11, 12, 2, 5, 2, 2, 1, 2},
      {"depthwise 3x3 dilation 2", 3, 10, 9, 3, 3, 1, 2, 2, 3},
  };
  const int N = 3;
  for (const Case& t : cases)
    for (bool with_bias : {false, true})
      for (int threads : {1, 3}) {
        INFO(t.name << (with_bias ? ", bias" : ", no bias") << ", " << threads << " threads");
        CpuBackend backend(threads);
        Conv2dDesc d;
        d.in_channels = t.C;
        d.out_channels = t.K;
        d.kernel_h = d.kernel_w = t.k;
        d.stride = t.stride;
        d.padding = t.pad;
        d.dilation = t.dilation;
        d.groups = t.groups;
        const int HO = (t.H + 2 * t.pad - t.dilation * (t.k - 1) - 1) / t.stride + 1;
        const int WO = (t.W + 2 * t.pad - t.dilation * (t.k - 1) - 1) / t.stride + 1;
        const Shape xs{N, t.C, t.H, t.W}, ys{N, t.K, HO, WO}, wshape{t.K, t.C / t.groups, t.k, t.k};
        std::vector<float> x = random_values(xs.elements(), 11), w = random_values(wshape.elements(), 12);
        std::vector<float> bias = random_values(static_cast<std::size_t>(t.K), 13);
        const std::size_t bytes = backend.conv2d_workspace_bytes(d, xs, ys, ConvPass::forward, 0);
        memory::Buffer ws(memory::host_resource(), std::max<std::size_t>(bytes, 1), memory::Category::workspace);
        const Tensor b = with_bias ? Tensor{bias.data(), Shape{t.K}} : Tensor{};
        const std::vector<float> prefill = random_values(ys.elements(), 14);
        std::vector<float> y(prefill.size(), 9.f), added = prefill;
        backend.conv2d_forward(d, Tensor{x.data(), xs}, Tensor{w.data(), wshape}, b, Tensor{y.data(), ys}, false,
                               Workspace{ws.data(), bytes});
        backend.conv2d_forward(d, Tensor{x.data(), xs}, Tensor{w.data(), wshape}, b, Tensor{added.data(), ys}, true,
                               Workspace{ws.data(), bytes});
        std::vector<float> expected = naive_conv(x, w, with_bias ? &bias : nullptr, N, t.C, t.H, t.W, t.K, t.k,
                                                 t.stride, t.pad, t.dilation, t.groups, HO, WO);
        CHECK(worst_difference(y, expected) < 1e-4);
        for (std::size_t i = 0; i < expected.size(); ++i) expected[i] += prefill[i];
        CHECK(worst_difference(added, expected) < 1e-4);
      }
}
