// The CPU backend's task losses (per-pixel softmax cross-entropy, sigmoid cross-entropy, MSE and
// Huber, softmax cross-entropy with label smoothing) against straightforward double-precision
// references of PyTorch's definitions, their gradients against finite differences of their
// losses, their errors, and their workspace: too small a one refused, and no heap allocation
// beside it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include <cnnengine/base/error.hpp>
#include <cnnengine/base/task.hpp>
#include <cnnengine/engine/core/backend.hpp>
#include "tests/heap_counter.hpp"
#include "tests/relative_error.hpp"

using namespace cnn;
using cnn::testing::relative_error;

namespace {

std::vector<float> uniform(std::size_t n, std::uint64_t seed, float lo, float hi) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = lo + (hi - lo) * uniform01(seed, i);
  return v;
}

// What a call adds to: earlier micro-batches' sums, so that a call that overwrites shows.
struct Sums {
  float loss = 1.5f, correct = 2.0f, counted = 3.0f;
  Tensor loss_tensor() { return {&loss, Shape{1}}; }
  Tensor correct_tensor() { return {&correct, Shape{1}}; }
  Tensor counted_tensor() { return {&counted, Shape{1}}; }
};

// The workspace the backend's loss of `task` over `output` asks for, or `bytes` of it.
class LossWorkspace {
 public:
  LossWorkspace(Backend& backend, Task task, const Shape& output)
      : bytes_(backend.loss_workspace_bytes(task, output)) {}
  Workspace get() { return {bytes_.empty() ? nullptr : bytes_.data(), bytes_.size()}; }
  Workspace get(std::size_t bytes) { return {bytes_.data(), bytes}; }
  std::size_t bytes() const { return bytes_.size(); }

 private:
  std::vector<std::byte> bytes_;
};

struct Expected {
  double loss = 0, correct = 0, counted = 0;
  std::vector<double> gradient;
  std::vector<float> gradient_floats() const { return {gradient.begin(), gradient.end()}; }
};

std::vector<float> as_floats(const std::vector<double>& v) { return {v.begin(), v.end()}; }

// ---- per-pixel softmax cross-entropy ----

struct PixelCase {
  int n, classes, h, w;
  std::vector<float> logits;
  std::vector<std::uint8_t> masks;
  std::vector<float> weights;  // empty: all 1
  std::size_t pixels() const { return static_cast<std::size_t>(h) * w; }
  Shape shape() const { return Shape{n, classes, h, w}; }
};

// About a fifth of the pixels ignored; sample `all_ignored` (if any) entirely.
PixelCase pixel_case(int n, int classes, int h, int w, bool weighted, std::uint64_t seed, int all_ignored = -1,
                     float logit_range = 3.0f) {
  PixelCase c{n, classes, h, w, uniform(static_cast<std::size_t>(n) * classes * h * w, seed, -logit_range, logit_range),
              {}, {}};
  c.masks.resize(static_cast<std::size_t>(n) * c.pixels());
  for (std::size_t i = 0; i < c.masks.size(); ++i) {
    const float u = uniform01(seed + 1, i);
    c.masks[i] = u < 0.2f ? kIgnoreMask : static_cast<std::uint8_t>(uniform01(seed + 2, i) * classes);
    if (static_cast<int>(i / c.pixels()) == all_ignored) c.masks[i] = kIgnoreMask;
  }
  if (weighted) c.weights = uniform(static_cast<std::size_t>(classes), seed + 3, 0.25f, 2.0f);
  return c;
}

Expected pixel_reference(const PixelCase& c, double grad_scale) {
  Expected e;
  const std::size_t hw = c.pixels(), k_count = static_cast<std::size_t>(c.classes);
  e.gradient.assign(c.logits.size(), 0.0);
  for (std::size_t s = 0; s < static_cast<std::size_t>(c.n); ++s) {
    const auto logit = [&](std::size_t k, std::size_t p) {
      return static_cast<double>(c.logits[(s * k_count + k) * hw + p]);
    };
    double weight_sum = 0;
    for (std::size_t p = 0; p < hw; ++p) {
      const int y = c.masks[s * hw + p];
      if (y != kIgnoreMask) weight_sum += c.weights.empty() ? 1.0 : c.weights[static_cast<std::size_t>(y)];
    }
    double sample_loss = 0;
    for (std::size_t p = 0; p < hw; ++p) {
      const int y = c.masks[s * hw + p];
      if (y == kIgnoreMask) continue;
      const double w = c.weights.empty() ? 1.0 : c.weights[static_cast<std::size_t>(y)];
      double zmax = logit(0, p);
      std::size_t argmax = 0;
      for (std::size_t k = 1; k < k_count; ++k)
        if (logit(k, p) > zmax) {
          zmax = logit(k, p);
          argmax = k;
        }
      double sum = 0;
      for (std::size_t k = 0; k < k_count; ++k) sum += std::exp(logit(k, p) - zmax);
      const double log_sum = zmax + std::log(sum);
      sample_loss += w * (log_sum - logit(static_cast<std::size_t>(y), p));
      e.correct += static_cast<int>(argmax) == y;
      e.counted += 1;
      if (weight_sum > 0)
        for (std::size_t k = 0; k < k_count; ++k)
          e.gradient[(s * k_count + k) * hw + p] =
              w / weight_sum * (std::exp(logit(k, p) - log_sum) - (static_cast<int>(k) == y)) * grad_scale;
    }
    if (weight_sum > 0) e.loss += sample_loss / weight_sum;
  }
  return e;
}

struct Result {
  Sums sums;
  std::vector<float> gradient;
};

// Into `r`, whose sums it adds to.
void run_pixel_into(Result& r, Backend& backend, const PixelCase& c, float grad_scale, bool with_gradient = true) {
  r.gradient.assign(c.logits.size(), 123.0f);  // written, not added to
  const StepScalars step{0, 0, grad_scale};
  Tensor weights{c.weights.empty() ? nullptr : const_cast<float*>(c.weights.data()),
                 Shape{static_cast<int>(c.weights.size())}};
  LossWorkspace ws(backend, Task::segment, c.shape());
  backend.pixel_cross_entropy(Tensor{const_cast<float*>(c.logits.data()), c.shape()},
                              ByteTensor{c.masks.data(), c.masks.size()}, weights,
                              with_gradient ? Tensor{r.gradient.data(), c.shape()} : Tensor{}, &step,
                              r.sums.loss_tensor(), r.sums.correct_tensor(), r.sums.counted_tensor(), ws.get());
}

Result run_pixel(Backend& backend, const PixelCase& c, float grad_scale, bool with_gradient = true) {
  Result r;
  run_pixel_into(r, backend, c, grad_scale, with_gradient);
  return r;
}

void check_against(const Result& got, const Expected& want, double tolerance) {
  const Sums before;
  CHECK(std::abs((got.sums.loss - before.loss) - want.loss) <= tolerance * std::max(1.0, std::abs(want.loss)));
  // Counts exact; the regression's sum of |y - t| within the tolerance.
  CHECK(std::abs((got.sums.correct - before.correct) - want.correct) <=
        (want.correct == std::round(want.correct) ? 0.0 : tolerance * want.correct));
  CHECK(got.sums.counted - before.counted == want.counted);
  CHECK(relative_error(got.gradient, want.gradient_floats()) <= tolerance);
}

// The largest |finite difference of loss * scale - gradient| over the inputs, the loss a function
// of the inputs `x`; relative where the gradient is above 1.
template <class Loss>
double worst_difference(std::vector<float>& x, const std::vector<float>& gradient, double scale, Loss loss,
                        float step = 1e-2f) {
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float original = x[i];
    x[i] = original + step;
    const double plus = loss();
    x[i] = original - step;
    const double minus = loss();
    x[i] = original;
    const double numeric = (plus - minus) * scale / (2.0 * step);
    worst = std::max(worst, std::abs(numeric - gradient[i]) / std::max(1.0, std::abs(numeric)));
  }
  return worst;
}

}  // namespace

TEST_CASE("pixel cross-entropy matches a double-precision reference", "[task_loss]") {
  for (bool weighted : {false, true})
    for (int threads : {1, 3}) {
      CAPTURE(weighted, threads);
      CpuBackend backend(threads);
      // Small; then a sample of 667 pixels, several work items of a sample.
      for (const PixelCase& c : {pixel_case(3, 4, 3, 5, weighted, 11, 1), pixel_case(2, 3, 23, 29, weighted, 21),
                                 pixel_case(1, 1, 2, 2, weighted, 31)}) {
        CAPTURE(c.n, c.classes, c.h, c.w);
        const float scale = 1.0f / 7;
        const Result got = run_pixel(backend, c, scale);
        check_against(got, pixel_reference(c, scale), 1e-6);
        for (std::size_t i = 0; i < c.logits.size(); ++i) {
          const std::size_t pixel = i % c.pixels(), sample = i / c.pixels() / static_cast<std::size_t>(c.classes);
          if (c.masks[sample * c.pixels() + pixel] == kIgnoreMask) REQUIRE(got.gradient[i] == 0.0f);
        }
      }
    }
}

TEST_CASE("pixel cross-entropy gives the same bits on any thread count", "[task_loss]") {
  const PixelCase c = pixel_case(3, 5, 31, 37, true, 41);
  CpuBackend one(1), four(4);
  const Result a = run_pixel(one, c, 0.25f), b = run_pixel(four, c, 0.25f);
  CHECK(a.sums.loss == b.sums.loss);
  CHECK(a.sums.correct == b.sums.correct);
  CHECK(a.gradient == b.gradient);
}

TEST_CASE("pixel cross-entropy of a sample with every pixel ignored is 0", "[task_loss]") {
  CpuBackend backend(2);
  PixelCase c = pixel_case(1, 4, 3, 3, true, 51, 0);
  const Result got = run_pixel(backend, c, 1.0f);
  CHECK(got.sums.loss == Sums{}.loss);
  CHECK(got.sums.correct == Sums{}.correct);
  CHECK(got.sums.counted == Sums{}.counted);
  CHECK(got.gradient == std::vector<float>(c.logits.size(), 0.0f));

  SECTION("and so is one whose pixels all weigh 0, which still count for the accuracy") {
    c.masks.assign(c.masks.size(), 2);
    c.weights[2] = 0.0f;
    const Result zero = run_pixel(backend, c, 1.0f);
    CHECK(zero.sums.loss == Sums{}.loss);
    CHECK(zero.sums.counted - Sums{}.counted == 9.0f);
    CHECK(zero.gradient == std::vector<float>(c.logits.size(), 0.0f));
  }
}

TEST_CASE("pixel cross-entropy stays finite for logits of 1e4", "[task_loss]") {
  CpuBackend backend(2);
  PixelCase c = pixel_case(2, 3, 4, 4, true, 61);
  for (std::size_t i = 0; i < c.logits.size(); ++i) c.logits[i] = uniform01(62, i) < 0.5f ? -1e4f : 1e4f;
  const Result got = run_pixel(backend, c, 0.5f);
  const Expected want = pixel_reference(c, 0.5f);
  REQUIRE(std::isfinite(got.sums.loss));
  CHECK(want.loss > 1e3);  // some pixels' class has the small logit
  check_against(got, want, 1e-6);
}

TEST_CASE("pixel cross-entropy with weights all 1 is the loss without weights, to the bit", "[task_loss]") {
  CpuBackend backend(2);
  PixelCase plain = pixel_case(2, 4, 5, 6, false, 71), ones = plain;
  ones.weights.assign(4, 1.0f);
  const Result a = run_pixel(backend, plain, 0.5f), b = run_pixel(backend, ones, 0.5f);
  CHECK(a.sums.loss == b.sums.loss);
  CHECK(a.gradient == b.gradient);
}

TEST_CASE("pixel cross-entropy's gradient is the finite difference of its loss", "[task_loss]") {
  CpuBackend backend(1);
  PixelCase c = pixel_case(2, 4, 3, 4, true, 81);
  const float scale = 0.5f;
  const Result got = run_pixel(backend, c, scale);
  const double worst = worst_difference(c.logits, got.gradient, scale, [&] {
    return static_cast<double>(run_pixel(backend, c, scale, false).sums.loss) - Sums{}.loss;
  });
  CHECK(worst < 3e-4);
}

TEST_CASE("pixel cross-entropy rejects a mask value that is no class, naming it", "[task_loss]") {
  CpuBackend backend(2);
  PixelCase c = pixel_case(3, 4, 3, 5, false, 91);
  c.masks[1 * 15 + 1 * 5 + 2] = 7;  // sample 1, row 1, column 2
  c.masks[2 * 15] = 9;              // a later one: the first is reported
  Result got;
  try {
    run_pixel_into(got, backend, c, 1.0f);
    FAIL("no error");
  } catch (const DataError& e) {
    const std::string message = e.what();
    INFO(message);
    CHECK(message.find("mask value 7") != std::string::npos);
    CHECK(message.find("(1, 2)") != std::string::npos);
    CHECK(message.find("sample 1") != std::string::npos);
  }
  // Nothing written: the masks are checked first.
  CHECK(got.sums.loss == Sums{}.loss);
  CHECK(got.sums.counted == Sums{}.counted);
  CHECK(got.gradient == std::vector<float>(c.logits.size(), 123.0f));

  SECTION("a weight a class, or none") {
    c.masks[1 * 15 + 1 * 5 + 2] = 0;
    c.masks[2 * 15] = 0;
    c.weights.assign(3, 1.0f);
    CHECK_THROWS_AS(run_pixel(backend, c, 1.0f), ConfigError);
  }
  SECTION("a mask byte a pixel") {
    c.masks.pop_back();
    CHECK_THROWS_AS(run_pixel(backend, c, 1.0f), ShapeError);
  }
}

// ---- sigmoid cross-entropy ----

namespace {

struct LabelCase {
  int n, classes;
  std::vector<float> x, y, weights;
  Shape shape() const { return Shape{n, classes}; }
};

LabelCase label_case(int n, int classes, bool weighted, std::uint64_t seed, float range = 4.0f) {
  LabelCase c{n, classes, uniform(static_cast<std::size_t>(n) * classes, seed, -range, range), {}, {}};
  c.y.resize(c.x.size());
  for (std::size_t i = 0; i < c.y.size(); ++i) {
    const float u = uniform01(seed + 1, i);
    c.y[i] = u < 0.4f ? 0.0f : u < 0.8f ? 1.0f : uniform01(seed + 2, i);  // soft labels too
  }
  if (weighted) c.weights = uniform(static_cast<std::size_t>(classes), seed + 3, 0.5f, 3.0f);
  return c;
}

Expected sigmoid_reference(const LabelCase& c, double threshold_logit, double grad_scale) {
  Expected e;
  const std::size_t k_count = static_cast<std::size_t>(c.classes);
  e.gradient.resize(c.x.size());
  for (std::size_t i = 0; i < c.x.size(); ++i) {
    const double x = c.x[i], y = c.y[i], p = c.weights.empty() ? 1.0 : c.weights[i % k_count];
    const double s = 1.0 / (1.0 + std::exp(-x));
    // log sigmoid(x) = -log(1 + e^-x); log(1 - sigmoid(x)) = -log(1 + e^x)
    const double log_s = x > 0 ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x));
    const double log_not_s = x > 0 ? -x - std::log1p(std::exp(-x)) : -std::log1p(std::exp(x));
    e.loss += -(p * y * log_s + (1 - y) * log_not_s) / c.classes;
    e.correct += (x > threshold_logit) == (y > 0.5);
    e.gradient[i] = ((1 - y) * s - p * y * (1 - s)) / c.classes * grad_scale;
  }
  e.counted = static_cast<double>(c.x.size());
  return e;
}

Result run_sigmoid(Backend& backend, const LabelCase& c, float threshold_logit, float grad_scale,
                   bool with_gradient = true) {
  Result r;
  r.gradient.assign(c.x.size(), 123.0f);
  const StepScalars step{0, 0, grad_scale};
  Tensor weights{c.weights.empty() ? nullptr : const_cast<float*>(c.weights.data()),
                 Shape{static_cast<int>(c.weights.size())}};
  LossWorkspace ws(backend, Task::multilabel, c.shape());
  backend.sigmoid_cross_entropy(Tensor{const_cast<float*>(c.x.data()), c.shape()},
                                Tensor{const_cast<float*>(c.y.data()), c.shape()}, weights, threshold_logit,
                                with_gradient ? Tensor{r.gradient.data(), c.shape()} : Tensor{}, &step,
                                r.sums.loss_tensor(), r.sums.correct_tensor(), r.sums.counted_tensor(), ws.get());
  return r;
}

}  // namespace

TEST_CASE("sigmoid cross-entropy matches a double-precision reference", "[task_loss]") {
  for (bool weighted : {false, true})
    for (float threshold : {0.0f, 0.8472979f})  // probabilities 0.5 and 0.7
      for (int threads : {1, 3}) {
        CAPTURE(weighted, threshold, threads);
        CpuBackend backend(threads);
        const LabelCase c = label_case(9, 6, weighted, 101);
        check_against(run_sigmoid(backend, c, threshold, 0.125f), sigmoid_reference(c, threshold, 0.125f), 1e-6);
      }
}

TEST_CASE("sigmoid cross-entropy stays finite for logits of 1e4", "[task_loss]") {
  CpuBackend backend(2);
  LabelCase c = label_case(4, 5, true, 111);
  for (std::size_t i = 0; i < c.x.size(); ++i) c.x[i] = uniform01(112, i) < 0.5f ? -1e4f : 1e4f;
  const Result got = run_sigmoid(backend, c, 0.0f, 1.0f);
  const Expected want = sigmoid_reference(c, 0.0, 1.0);
  REQUIRE(std::isfinite(got.sums.loss));
  CHECK(want.loss > 1e3);
  check_against(got, want, 1e-6);
}

TEST_CASE("sigmoid cross-entropy's gradient is the finite difference of its loss", "[task_loss]") {
  CpuBackend backend(1);
  LabelCase c = label_case(3, 5, true, 121);
  const Result got = run_sigmoid(backend, c, 0.0f, 0.5f);
  const double worst = worst_difference(c.x, got.gradient, 0.5, [&] {
    return static_cast<double>(run_sigmoid(backend, c, 0.0f, 0.5f, false).sums.loss) - Sums{}.loss;
  });
  CHECK(worst < 3e-4);
}

TEST_CASE("sigmoid cross-entropy refuses positive weights of another count", "[task_loss]") {
  CpuBackend backend(1);
  LabelCase c = label_case(2, 4, false, 131);
  c.weights.assign(5, 1.0f);
  CHECK_THROWS_AS(run_sigmoid(backend, c, 0.0f, 1.0f), ConfigError);
  Sums sums;
  CHECK_THROWS_AS(backend.sigmoid_cross_entropy(Tensor{c.x.data(), c.shape()}, Tensor{c.y.data(), Shape{2, 3}},
                                                Tensor{}, 0.0f, Tensor{}, nullptr, sums.loss_tensor(),
                                                sums.correct_tensor(), sums.counted_tensor(), Workspace{}),
                  ShapeError);
}

// ---- regression ----

namespace {

Expected regression_reference(RegressionLoss kind, double delta, const LabelCase& c, double grad_scale) {
  Expected e;
  e.gradient.resize(c.x.size());
  for (std::size_t i = 0; i < c.x.size(); ++i) {
    const double d = static_cast<double>(c.x[i]) - c.y[i];
    double loss, slope;
    if (kind == RegressionLoss::mse) {
      loss = d * d;
      slope = 2 * d;
    } else if (std::abs(d) < delta) {
      loss = 0.5 * d * d;
      slope = d;
    } else {
      loss = delta * (std::abs(d) - 0.5 * delta);
      slope = d > 0 ? delta : -delta;
    }
    e.loss += loss / c.classes;
    e.correct += std::abs(d);
    e.gradient[i] = slope / c.classes * grad_scale;
  }
  e.counted = static_cast<double>(c.x.size());
  return e;
}

Result run_regression(Backend& backend, RegressionLoss kind, float delta, const LabelCase& c, float grad_scale,
                      bool with_gradient = true) {
  Result r;
  r.gradient.assign(c.x.size(), 123.0f);
  const StepScalars step{0, 0, grad_scale};
  LossWorkspace ws(backend, Task::regress, c.shape());
  backend.regression_loss(kind, delta, Tensor{const_cast<float*>(c.x.data()), c.shape()},
                          Tensor{const_cast<float*>(c.y.data()), c.shape()},
                          with_gradient ? Tensor{r.gradient.data(), c.shape()} : Tensor{}, &step,
                          r.sums.loss_tensor(), r.sums.correct_tensor(), r.sums.counted_tensor(), ws.get());
  return r;
}

}  // namespace

TEST_CASE("regression losses match a double-precision reference", "[task_loss]") {
  for (RegressionLoss kind : {RegressionLoss::mse, RegressionLoss::huber})
    for (int threads : {1, 3}) {
      CAPTURE(to_string(kind), threads);
      CpuBackend backend(threads);
      LabelCase c = label_case(7, 3, false, 141, 2.0f);
      c.y = uniform(c.x.size(), 142, -2.0f, 2.0f);
      const Result got = run_regression(backend, kind, 0.7f, c, 0.25f);
      const Expected want = regression_reference(kind, 0.7f, c, 0.25f);
      check_against(got, want, 1e-6);
    }
}

TEST_CASE("regression losses' gradients are the finite differences of their losses", "[task_loss]") {
  CpuBackend backend(1);
  for (RegressionLoss kind : {RegressionLoss::mse, RegressionLoss::huber}) {
    CAPTURE(to_string(kind));
    LabelCase c = label_case(3, 4, false, 151, 2.0f);
    c.y = uniform(c.x.size(), 152, -2.0f, 2.0f);
    const float delta = 0.7f, step = 1e-3f;
    for (std::size_t i = 0; i < c.x.size(); ++i)  // off Huber's seam, where the slope jumps
      if (std::abs(std::abs(c.x[i] - c.y[i]) - delta) < 4 * step) c.x[i] += 8 * step;
    const Result got = run_regression(backend, kind, delta, c, 0.5f);
    const auto loss = [&] {
      return static_cast<double>(run_regression(backend, kind, delta, c, 0.5f, false).sums.loss) - Sums{}.loss;
    };
    const double worst = worst_difference(c.x, got.gradient, 0.5, loss, step);
    CHECK(worst < 1e-3);
  }
}

TEST_CASE("regression losses take a target that is not finite without crashing", "[task_loss]") {
  CpuBackend backend(2);
  LabelCase c = label_case(2, 3, false, 161);
  c.y[1] = std::numeric_limits<float>::quiet_NaN();
  c.y[4] = std::numeric_limits<float>::infinity();
  for (RegressionLoss kind : {RegressionLoss::mse, RegressionLoss::huber}) {
    const Result got = run_regression(backend, kind, 1.0f, c, 1.0f);
    CHECK_FALSE(std::isfinite(got.sums.loss));
    CHECK(std::isfinite(got.gradient[0]));  // the other values' gradients are theirs
    CHECK(got.sums.counted - Sums{}.counted == 6.0f);
  }
}

TEST_CASE("the Huber loss needs a positive delta", "[task_loss]") {
  CpuBackend backend(1);
  const LabelCase c = label_case(2, 3, false, 171);
  CHECK_THROWS_AS(run_regression(backend, RegressionLoss::huber, 0.0f, c, 1.0f), ConfigError);
  CHECK_THROWS_AS(run_regression(backend, RegressionLoss::huber, std::nanf(""), c, 1.0f), ConfigError);
  CHECK_NOTHROW(run_regression(backend, RegressionLoss::mse, 0.0f, c, 1.0f));  // MSE has no delta
}

// ---- the workspace ----

namespace {

// One call of each task loss over inputs made once, the workspace given as `ws` (or as asked for).
struct TaskLossCalls {
  PixelCase pixels = pixel_case(2, 4, 64, 64, true, 221);
  LabelCase labels = label_case(64, 512, true, 222);
  std::vector<float> gradient = std::vector<float>(std::max(pixels.logits.size(), labels.x.size()));
  StepScalars step{0, 0, 0.5f};
  Sums sums;

  Tensor grad(const Shape& shape) { return {gradient.data(), shape}; }
  void pixel(Backend& b, Workspace ws) {
    b.pixel_cross_entropy(Tensor{pixels.logits.data(), pixels.shape()},
                          ByteTensor{pixels.masks.data(), pixels.masks.size()},
                          Tensor{pixels.weights.data(), Shape{pixels.classes}}, grad(pixels.shape()), &step,
                          sums.loss_tensor(), sums.correct_tensor(), sums.counted_tensor(), ws);
  }
  void sigmoid(Backend& b, Workspace ws) {
    b.sigmoid_cross_entropy(Tensor{labels.x.data(), labels.shape()}, Tensor{labels.y.data(), labels.shape()},
                            Tensor{labels.weights.data(), Shape{labels.classes}}, 0.0f, grad(labels.shape()), &step,
                            sums.loss_tensor(), sums.correct_tensor(), sums.counted_tensor(), ws);
  }
  void regression(Backend& b, Workspace ws) {
    b.regression_loss(RegressionLoss::huber, 0.5f, Tensor{labels.x.data(), labels.shape()},
                      Tensor{labels.y.data(), labels.shape()}, grad(labels.shape()), &step, sums.loss_tensor(),
                      sums.correct_tensor(), sums.counted_tensor(), ws);
  }
};

}  // namespace

TEST_CASE("the task losses ask for a workspace by their output's shape", "[task_loss]") {
  CpuBackend one(1), four(4);
  CHECK(one.loss_workspace_bytes(Task::classify, Shape{8, 10}) == 0);
  for (Task task : {Task::segment, Task::multilabel, Task::regress}) {
    CAPTURE(to_string(task));
    const Shape output = task == Task::segment ? Shape{4, 3, 16, 16} : Shape{4, 7};
    Shape twice = output;
    twice[0] = 8;
    const std::size_t bytes = one.loss_workspace_bytes(task, output);
    CHECK(bytes > 0);
    CHECK(one.loss_workspace_bytes(task, twice) == 2 * bytes);
    CHECK(four.loss_workspace_bytes(task, output) == bytes);  // planned once, whatever the threads
  }
  // a sample's pixels in more work items
  CHECK(one.loss_workspace_bytes(Task::segment, Shape{4, 3, 16, 32}) >
        one.loss_workspace_bytes(Task::segment, Shape{4, 3, 16, 16}));
}

TEST_CASE("a task loss refuses a workspace smaller than it asks for, naming both sizes", "[task_loss]") {
  CpuBackend backend(2);
  TaskLossCalls calls;
  struct Loss {
    const char* name;
    Task task;
    Shape output;
    void (TaskLossCalls::*call)(Backend&, Workspace);
  };
  const Loss losses[] = {
      {"pixel_cross_entropy", Task::segment, calls.pixels.shape(), &TaskLossCalls::pixel},
      {"sigmoid_cross_entropy", Task::multilabel, calls.labels.shape(), &TaskLossCalls::sigmoid},
      {"regression_loss", Task::regress, calls.labels.shape(), &TaskLossCalls::regression}};
  for (const Loss& loss : losses) {
    CAPTURE(loss.name);
    LossWorkspace ws(backend, loss.task, loss.output);
    REQUIRE(ws.bytes() > 8);
    calls.gradient.assign(calls.gradient.size(), 123.0f);
    try {
      (calls.*loss.call)(backend, ws.get(ws.bytes() - 8));
      FAIL("no error");
    } catch (const std::logic_error& e) {
      const std::string message = e.what();
      INFO(message);
      CHECK(message.find(loss.name) != std::string::npos);
      CHECK(message.find(std::to_string(ws.bytes() - 8) + " bytes") != std::string::npos);
      CHECK(message.find(std::to_string(ws.bytes()) + " needed") != std::string::npos);
    }
    CHECK_THROWS_AS((calls.*loss.call)(backend, Workspace{}), std::logic_error);
    std::vector<std::byte> unaligned(ws.bytes() + 8);
    CHECK_THROWS_AS((calls.*loss.call)(backend, Workspace{unaligned.data() + 1, ws.bytes()}), std::logic_error);
    // refused before anything is written
    CHECK(calls.sums.loss == Sums{}.loss);
    CHECK(calls.sums.counted == Sums{}.counted);
    CHECK(calls.gradient == std::vector<float>(calls.gradient.size(), 123.0f));
    // and a workspace larger than asked for is taken
    std::vector<std::byte> more(ws.bytes() + 64);
    CHECK_NOTHROW((calls.*loss.call)(backend, Workspace{more.data(), more.size()}));
    CHECK(calls.sums.loss != Sums{}.loss);
    calls.sums = Sums{};
  }
}

TEST_CASE("a task loss's call makes no heap allocation", "[task_loss]") {
  CpuBackend backend(3);
  TaskLossCalls calls;
  LossWorkspace pixel_ws(backend, Task::segment, calls.pixels.shape());
  LossWorkspace sigmoid_ws(backend, Task::multilabel, calls.labels.shape());
  LossWorkspace regression_ws(backend, Task::regress, calls.labels.shape());
  // Warm-up: the thread pool is built on first use, and a pool worker's first range sets up its
  // thread state with malloc (6 allocations seen under the sanitizers in a measured call, after
  // one warm-up round in which that worker took no range). Each round is another chance for
  // every worker to take one.
  for (int round = 0; round < 5; ++round) {
    calls.pixel(backend, pixel_ws.get());
    calls.sigmoid(backend, sigmoid_ws.get());
    calls.regression(backend, regression_ws.get());
  }

  long before = testing::heap_allocations();
  calls.pixel(backend, pixel_ws.get());
  const long pixel = testing::heap_allocations() - before;
  before = testing::heap_allocations();
  calls.sigmoid(backend, sigmoid_ws.get());
  const long sigmoid = testing::heap_allocations() - before;
  before = testing::heap_allocations();
  calls.regression(backend, regression_ws.get());
  const long regression = testing::heap_allocations() - before;
  CHECK(pixel == 0);
  CHECK(sigmoid == 0);
  CHECK(regression == 0);
}

TEST_CASE("a task loss gives the same bits in a workspace holding earlier calls' leftovers", "[task_loss]") {
  CpuBackend backend(3);
  TaskLossCalls fresh, reused;
  LossWorkspace clean(backend, Task::segment, fresh.pixels.shape());
  LossWorkspace dirty(backend, Task::segment, fresh.pixels.shape());
  std::fill_n(static_cast<std::byte*>(dirty.get().data), dirty.bytes(), std::byte{0xa5});
  fresh.pixel(backend, clean.get());
  reused.pixel(backend, dirty.get());
  CHECK(fresh.sums.loss == reused.sums.loss);
  CHECK(fresh.sums.correct == reused.sums.correct);
  CHECK(fresh.gradient == reused.gradient);
}

// ---- softmax cross-entropy with label smoothing ----

namespace {

struct ClassCase {
  int n, classes;
  std::vector<float> logits;
  std::vector<std::int32_t> labels;
  Shape shape() const { return Shape{n, classes}; }
};

ClassCase class_case(int n, int classes, std::uint64_t seed) {
  ClassCase c{n, classes, uniform(static_cast<std::size_t>(n) * classes, seed, -3.0f, 3.0f), {}};
  for (int i = 0; i < n; ++i) c.labels.push_back(static_cast<std::int32_t>(uniform01(seed + 1, i) * classes));
  return c;
}

Expected smoothed_reference(const ClassCase& c, double e, double grad_scale) {
  Expected r;
  const std::size_t k_count = static_cast<std::size_t>(c.classes);
  r.gradient.resize(c.logits.size());
  for (std::size_t i = 0; i < static_cast<std::size_t>(c.n); ++i) {
    const float* z = c.logits.data() + i * k_count;
    double zmax = z[0];
    std::size_t argmax = 0;
    for (std::size_t k = 1; k < k_count; ++k)
      if (z[k] > zmax) {
        zmax = z[k];
        argmax = k;
      }
    double sum = 0;
    for (std::size_t k = 0; k < k_count; ++k) sum += std::exp(z[k] - zmax);
    const double log_sum = zmax + std::log(sum);
    double mean_nll = 0;  // mean_k -log p_k
    for (std::size_t k = 0; k < k_count; ++k) mean_nll += (log_sum - z[k]) / c.classes;
    const std::size_t y = static_cast<std::size_t>(c.labels[i]);
    r.loss += (1 - e) * (log_sum - z[y]) + e * mean_nll;
    r.correct += argmax == y;
    for (std::size_t k = 0; k < k_count; ++k)
      r.gradient[i * k_count + k] = (std::exp(z[k] - log_sum) - (1 - e) * (k == y) - e / c.classes) * grad_scale;
  }
  return r;
}

// The plain loss's arithmetic as CpuBackend::softmax_cross_entropy had it before smoothing.
Result plain_softmax_replica(const ClassCase& c, double grad_scale) {
  Result r;
  r.gradient.resize(c.logits.size());
  const int classes = c.classes;
  double loss = 0.0;
  int right = 0;
  for (int i = 0; i < c.n; ++i) {
    const int label = c.labels[static_cast<std::size_t>(i)];
    const float* z = c.logits.data() + static_cast<std::size_t>(i) * classes;
    int argmax = 0;
    for (int k = 1; k < classes; ++k)
      if (z[k] > z[argmax]) argmax = k;
    const float zmax = z[argmax];
    double sum = 0.0;
    for (int k = 0; k < classes; ++k) sum += std::exp(static_cast<double>(z[k] - zmax));
    const double log_sum = std::log(sum);
    loss += log_sum - static_cast<double>(z[label] - zmax);
    right += argmax == label;
    float* d = r.gradient.data() + static_cast<std::size_t>(i) * classes;
    for (int k = 0; k < classes; ++k) {
      const double p = std::exp(static_cast<double>(z[k] - zmax) - log_sum);
      d[k] = static_cast<float>((p - (k == label ? 1.0 : 0.0)) * grad_scale);
    }
  }
  r.sums.loss += static_cast<float>(loss);
  r.sums.correct += static_cast<float>(right);
  return r;
}

Result run_softmax(Backend& backend, const ClassCase& c, float smoothing, float grad_scale, bool with_gradient = true) {
  Result r;
  r.gradient.assign(c.logits.size(), 123.0f);
  const StepScalars step{0, 0, grad_scale};
  std::vector<std::int32_t> labels = c.labels;
  backend.softmax_cross_entropy(Tensor{const_cast<float*>(c.logits.data()), c.shape()},
                                IntTensor{labels.data(), labels.size()}, smoothing,
                                with_gradient ? Tensor{r.gradient.data(), c.shape()} : Tensor{}, &step,
                                r.sums.loss_tensor(), r.sums.correct_tensor());
  return r;
}

}  // namespace

TEST_CASE("softmax cross-entropy with label smoothing matches PyTorch's definition", "[task_loss]") {
  CpuBackend backend(2);
  const ClassCase c = class_case(6, 5, 181);
  for (float e : {0.1f, 0.5f, 0.9f}) {
    CAPTURE(e);
    const Result got = run_softmax(backend, c, e, 0.2f);
    const Expected want = smoothed_reference(c, e, 0.2f);
    CHECK(std::abs((got.sums.loss - Sums{}.loss) - want.loss) <= 1e-6 * want.loss);
    CHECK(got.sums.correct - Sums{}.correct == want.correct);
    CHECK(relative_error(got.gradient, want.gradient_floats()) <= 1e-6);
  }
}

TEST_CASE("softmax cross-entropy with label smoothing 0 is the plain loss, to the bit", "[task_loss]") {
  CpuBackend backend(2);
  const ClassCase c = class_case(9, 7, 191);
  const Result got = run_softmax(backend, c, 0.0f, 0.125f), want = plain_softmax_replica(c, 0.125f);
  CHECK(got.sums.loss == want.sums.loss);
  CHECK(got.sums.correct == want.sums.correct);
  CHECK(got.gradient == want.gradient);
  // and smoothing changes it
  CHECK(run_softmax(backend, c, 0.1f, 0.125f).sums.loss != got.sums.loss);
}

TEST_CASE("softmax cross-entropy's smoothed gradient is the finite difference of its loss", "[task_loss]") {
  CpuBackend backend(1);
  ClassCase c = class_case(4, 6, 201);
  const Result got = run_softmax(backend, c, 0.2f, 0.5f);
  const double worst = worst_difference(c.logits, got.gradient, 0.5, [&] {
    return static_cast<double>(run_softmax(backend, c, 0.2f, 0.5f, false).sums.loss) - Sums{}.loss;
  });
  CHECK(worst < 3e-4);
}

TEST_CASE("softmax cross-entropy refuses label smoothing below 0, from 1 on, or NaN", "[task_loss]") {
  CpuBackend backend(1);
  const ClassCase c = class_case(2, 3, 211);
  for (float e : {-0.1f, 1.0f, std::nanf("")}) {
    CAPTURE(e);
    CHECK_THROWS_AS(run_softmax(backend, c, e, 1.0f), ConfigError);
  }
}
