// A finite-difference gradient check for every layer and the loss, on the CPU backend.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>

#include <cnnengine/base/error.hpp>
#include <cnnengine/engine/core/backend.hpp>
#include "gradient_checker.hpp"
#include "layers/add.hpp"
#include "layers/batchnorm2d.hpp"
#include "layers/conv2d.hpp"
#include "layers/dense.hpp"
#include "layers/dropout.hpp"
#include "layers/pool2d.hpp"
#include "layers/relu.hpp"

using namespace cnn;
using cnn::testing::check_gradients;
using cnn::testing::GradientCheckOptions;
using cnn::testing::require_close;

TEST_CASE("conv2d gradients", "[gradients]") {
  GradientCheckOptions o;
  SECTION("3x3, padding 1") { Conv2D l(4, 3, 1, 1); require_close(l, {Shape{3, 6, 5}}, o); }
  SECTION("3x3, stride 2, no padding") { Conv2D l(3, 3, 2, 0); require_close(l, {Shape{2, 7, 7}}, o); }
  SECTION("1x1 pointwise, no bias") { Conv2D l(5, 1, 1, 0, false); require_close(l, {Shape{3, 4, 4}}, o); }
  SECTION("5x5, stride 2, padding 2") { Conv2D l(2, 5, 2, 2); require_close(l, {Shape{2, 6, 9}}, o); }
}

TEST_CASE("dense gradients", "[gradients]") {
  GradientCheckOptions o;
  SECTION("from a flat input") { Dense l(7); require_close(l, {Shape{11}}, o); }
  SECTION("from an image (flattened)") { Dense l(4, false); require_close(l, {Shape{2, 3, 3}}, o); }
}

TEST_CASE("relu gradients", "[gradients]") {
  GradientCheckOptions o;
  o.step = 1e-3f;
  ReLU l;
  require_close(l, {Shape{3, 5, 5}}, o);
}

TEST_CASE("pooling gradients", "[gradients]") {
  GradientCheckOptions o;
  o.step = 1e-3f;
  SECTION("max 2x2") { Pool2D l(PoolMode::max, 2); require_close(l, {Shape{3, 6, 6}}, o); }
  SECTION("max 2x2 over odd sizes") { Pool2D l(PoolMode::max, 2); require_close(l, {Shape{2, 7, 5}}, o); }
  // Rows of 9 and 5 windows: four at a time in vector lanes, the rest one by one.
  SECTION("max 2x2, wide rows") { Pool2D l(PoolMode::max, 2); require_close(l, {Shape{2, 4, 18}}, o); }
  SECTION("max 2x2, wide odd rows") { Pool2D l(PoolMode::max, 2); require_close(l, {Shape{2, 5, 11}}, o); }
  SECTION("max 3x3 stride 2 pad 1") { Pool2D l(PoolMode::max, 3, 2, 1); require_close(l, {Shape{2, 7, 5}}, o); }
  SECTION("average 2x2") { Pool2D l(PoolMode::average, 2); require_close(l, {Shape{3, 6, 6}}, o); }
  SECTION("average 3x3 stride 2 pad 1") { Pool2D l(PoolMode::average, 3, 2, 1); require_close(l, {Shape{2, 7, 5}}, o); }
  SECTION("global average") {
    Pool2D l = Pool2D::global_average();
    require_close(l, {Shape{4, 5, 3}}, o);
  }
}

TEST_CASE("batchnorm gradients", "[gradients]") {
  GradientCheckOptions o;
  o.batch = 4;
  o.step = 1e-3f;
  SECTION("training, images") { BatchNorm2D l; require_close(l, {Shape{3, 4, 4}}, o, 2e-2); }
  SECTION("training, features") { BatchNorm2D l; require_close(l, {Shape{6}}, o, 2e-2); }
}

TEST_CASE("dropout gradients", "[gradients]") {
  GradientCheckOptions o;
  Dropout l(0.4f);
  require_close(l, {Shape{3, 4, 4}}, o);
}

TEST_CASE("add gradients", "[gradients]") {
  GradientCheckOptions o;
  Add l;
  require_close(l, {Shape{2, 3, 3}, Shape{2, 3, 3}}, o);
}

TEST_CASE("softmax cross-entropy gradient", "[gradients]") {
  CpuBackend backend(1);
  const int n = 5, classes = 7;
  std::vector<float> logits(n * classes), dlogits(n * classes), metrics(2, 0.f);
  for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = 4.f * uniform01(3, i) - 2.f;
  std::vector<std::int32_t> labels{0, 3, 6, 2, 3};
  const IntTensor label_view{labels.data(), labels.size()};
  const float scale = 1.0f / n;
  const StepScalars scalars{0, 0, scale};
  auto loss = [&]() {
    std::vector<float> m(2, 0.f);
    backend.softmax_cross_entropy(Tensor{logits.data(), Shape{n, classes}}, label_view, 0.0f, Tensor{}, nullptr,
                                  Tensor{m.data(), Shape{1}}, Tensor{m.data() + 1, Shape{1}});
    return static_cast<double>(m[0]) * scale;
  };
  backend.softmax_cross_entropy(Tensor{logits.data(), Shape{n, classes}}, label_view, 0.0f,
                                Tensor{dlogits.data(), Shape{n, classes}}, &scalars, Tensor{metrics.data(), Shape{1}},
                                Tensor{metrics.data() + 1, Shape{1}});
  const float step = 1e-2f;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const float original = logits[i];
    logits[i] = original + step;
    const double plus = loss();
    logits[i] = original - step;
    const double minus = loss();
    logits[i] = original;
    CHECK(std::abs((plus - minus) / (2 * step) - dlogits[i]) < 1e-3);
  }

  SECTION("a label outside the classes is an error naming the sample") {
    labels[2] = 7;
    try {
      loss();
      FAIL("no error");
    } catch (const DataError& e) {
      CHECK(std::string(e.what()).find("sample 2") != std::string::npos);
    }
  }
}

namespace {
// A layer whose backward is wrong on purpose: the checker must notice.
class WrongGradient final : public Layer {
 public:
  std::string type_name() const override { return "wrong"; }
  std::string describe() const override { return "wrong"; }
  Shape output_shape(const std::vector<Shape>& inputs) override { return inputs.at(0); }
  void forward(const LayerContext& c) override { c.backend->copy_or_add(c.inputs[0], c.output, false); }
  void backward(const LayerContext& c) override {
    c.backend->copy_or_add(c.grad_output, c.grad_inputs[0], c.accumulate[0]);
    c.backend->copy_or_add(c.grad_output, c.grad_inputs[0], true);  // twice: 2x the true gradient
  }
};
}  // namespace

TEST_CASE("the gradient checker catches a wrong gradient", "[gradients]") {
  WrongGradient l;
  const auto r = check_gradients(l, {Shape{2, 3, 3}}, GradientCheckOptions{});
  CHECK(r.worst_input_error > 0.1);
}
