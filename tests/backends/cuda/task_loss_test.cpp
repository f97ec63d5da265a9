// The task losses on CUDA (per-pixel softmax cross-entropy, sigmoid cross-entropy, MSE and Huber)
// against the CPU backend: the sums added to, the gradient written and scaled, the same bits on
// every run, and a mask value that is no class surfacing as a DataError at the next
// synchronisation.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "support.hpp"

#include <cnnengine/base/error.hpp>
#include <cnnengine/base/task.hpp>

using namespace cnn;
using namespace cnn::cuda_test;

namespace {

// Masks on both sides.
class TwinMasks {
 public:
  TwinMasks(Backend& gpu, const std::vector<std::uint8_t>& masks)
      : size_(masks.size()), cpu_(cuda_test::cpu(), masks.size()), gpu_(gpu, masks.size()) {
    std::memcpy(cpu_.data(), masks.data(), size_);
    gpu.copy_to_device(masks.data(), gpu_.data(), size_);
  }
  ByteTensor cpu() const { return {static_cast<const std::uint8_t*>(cpu_.data()), size_}; }
  ByteTensor gpu() const { return {static_cast<const std::uint8_t*>(gpu_.data()), size_}; }

 private:
  std::size_t size_;
  DeviceBuffer cpu_, gpu_;
};

// The workspace a backend's loss of `task` over `output` asks for (host memory: only the CPU asks).
class LossWorkspace {
 public:
  LossWorkspace(Backend& backend, Task task, const Shape& output)
      : bytes_(backend.loss_workspace_bytes(task, output)) {}
  Workspace get() { return {bytes_.empty() ? nullptr : bytes_.data(), bytes_.size()}; }

 private:
  std::vector<std::byte> bytes_;
};

// About a fifth of the pixels ignored, and sample `all_ignored` (if any) entirely.
std::vector<std::uint8_t> random_masks(std::size_t samples, std::size_t pixels, int classes, std::uint64_t seed,
                                       int all_ignored = -1) {
  const std::vector<float> u = random_values(samples * pixels, seed, 0.0f, 1.0f);
  const std::vector<float> v = random_values(samples * pixels, seed + 1, 0.0f, 1.0f);
  std::vector<std::uint8_t> masks(samples * pixels);
  for (std::size_t i = 0; i < masks.size(); ++i)
    masks[i] = u[i] < 0.2f || static_cast<int>(i / pixels) == all_ignored
                   ? kIgnoreMask
                   : static_cast<std::uint8_t>(std::min(static_cast<int>(v[i] * classes), classes - 1));
  return masks;
}

// The three sums a task loss adds to, holding earlier micro-batches' sums.
struct TwinSums {
  Twin loss{gpu(), Shape{1}, std::vector<float>{1.5f}};
  Twin correct{gpu(), Shape{1}, std::vector<float>{2.0f}};
  Twin counted{gpu(), Shape{1}, std::vector<float>{3.0f}};
  void check(double tolerance) const {
    CHECK(loss.relative_error() <= tolerance);
    CHECK(correct.relative_error() <= tolerance);
    CHECK(counted.gpu_values() == counted.cpu_values());
  }
};

void check_pixel_loss(int n, int classes, int h, int w, bool weighted, bool with_gradient, float logit_range = 4.0f,
                      int all_ignored = -1) {
  INFO(n << " x " << classes << " x " << h << " x " << w << ", weighted " << weighted << ", gradient "
         << with_gradient);
  const Shape shape{n, classes, h, w};
  Twin logits(gpu(), shape, random_values(shape.elements(), 301, -logit_range, logit_range));
  TwinMasks masks(gpu(), random_masks(static_cast<std::size_t>(n), static_cast<std::size_t>(h) * w, classes, 302,
                                      all_ignored));
  Twin weights(gpu(), Shape{classes}, random_values(static_cast<std::size_t>(classes), 303, 0.25f, 2.0f));
  Twin dlogits(gpu(), shape, 304);
  TwinSums sums;
  const TwinScalars step(gpu(), StepScalars{0, 0, 1.0f / static_cast<float>(n * 3)});
  LossWorkspace cpu_ws(cpu(), Task::segment, shape), gpu_ws(gpu(), Task::segment, shape);
  cpu().pixel_cross_entropy(logits.cpu(), masks.cpu(), weighted ? weights.cpu() : Tensor{},
                            with_gradient ? dlogits.cpu() : Tensor{}, step.cpu(), sums.loss.cpu(), sums.correct.cpu(),
                            sums.counted.cpu(), cpu_ws.get());
  gpu().pixel_cross_entropy(logits.gpu(), masks.gpu(), weighted ? weights.gpu() : Tensor{},
                            with_gradient ? dlogits.gpu() : Tensor{}, step.gpu(), sums.loss.gpu(), sums.correct.gpu(),
                            sums.counted.gpu(), gpu_ws.get());
  sums.check(1e-5);
  if (with_gradient) CHECK(dlogits.relative_error() <= 1e-5);
}

}  // namespace

TEST_CASE("cuda pixel cross-entropy matches the CPU", "[cuda][task_loss]") {
  for (bool weighted : {false, true}) {
    check_pixel_loss(3, 4, 3, 5, weighted, true, 4.0f, 1);  // sample 1 all ignored
    check_pixel_loss(2, 21, 37, 41, weighted, true);
    check_pixel_loss(5, 2, 64, 64, weighted, true);
    check_pixel_loss(4, 6, 8, 8, weighted, false);
    check_pixel_loss(4100, 3, 1, 2, weighted, true);  // more samples than one pass weighs
    check_pixel_loss(2, 5, 6, 7, weighted, true, 1e4f);  // finite for large logits
    check_pixel_loss(1, 1, 3, 3, weighted, true);
  }
}

TEST_CASE("cuda pixel cross-entropy reports a mask value that is no class on synchronize", "[cuda][task_loss]") {
  const Shape shape{3, 4, 3, 5};
  Twin logits(gpu(), shape, 311), dlogits(gpu(), shape, 312);
  TwinSums sums;
  const TwinScalars step(gpu(), StepScalars{0, 0, 1.0f});
  std::vector<std::uint8_t> values = random_masks(3, 15, 4, 313);
  values[1 * 15 + 1 * 5 + 2] = 7;  // sample 1, row 1, column 2
  values[2 * 15 + 4] = 200;        // a later one: the first is reported
  TwinMasks bad(gpu(), values);
  gpu().pixel_cross_entropy(logits.gpu(), bad.gpu(), Tensor{}, dlogits.gpu(), step.gpu(), sums.loss.gpu(),
                            sums.correct.gpu(), sums.counted.gpu(), Workspace{});
  try {
    gpu().synchronize();
    FAIL("no error");
  } catch (const DataError& e) {
    const std::string message = e.what();
    INFO(message);
    CHECK(message.find("mask value 7") != std::string::npos);
    CHECK(message.find("(1, 2)") != std::string::npos);
    CHECK(message.find("sample 1") != std::string::npos);
  }
  // Reported once: the backend goes on working.
  values[1 * 15 + 1 * 5 + 2] = kIgnoreMask;
  values[2 * 15 + 4] = 3;
  TwinMasks good(gpu(), values);
  gpu().pixel_cross_entropy(logits.gpu(), good.gpu(), Tensor{}, dlogits.gpu(), step.gpu(), sums.loss.gpu(),
                            sums.correct.gpu(), sums.counted.gpu(), Workspace{});
  CHECK_NOTHROW(gpu().synchronize());
  // and the softmax loss's labels are still reported as labels
  TwinLabels labels(gpu(), {0, 9});
  Twin class_logits(gpu(), Shape{2, 4}, 314);
  gpu().softmax_cross_entropy(class_logits.gpu(), labels.gpu(), 0.0f, Tensor{}, nullptr, sums.loss.gpu(),
                              sums.correct.gpu());
  try {
    gpu().synchronize();
    FAIL("no error");
  } catch (const DataError& e) {
    CHECK(std::string(e.what()).find("label 9 of sample 1") != std::string::npos);
  }
}

TEST_CASE("cuda pixel cross-entropy refuses class weights of another count", "[cuda][task_loss]") {
  const Shape shape{1, 4, 2, 2};
  Twin logits(gpu(), shape, 321), weights(gpu(), Shape{3}, 322);
  TwinMasks masks(gpu(), random_masks(1, 4, 4, 323));
  TwinSums sums;
  CHECK_THROWS_AS(gpu().pixel_cross_entropy(logits.gpu(), masks.gpu(), weights.gpu(), Tensor{}, nullptr,
                                            sums.loss.gpu(), sums.correct.gpu(), sums.counted.gpu(), Workspace{}),
                  ConfigError);
}

namespace {

void check_sigmoid_loss(int n, int classes, bool weighted, float threshold_logit, bool with_gradient,
                        float logit_range = 4.0f) {
  INFO(n << " x " << classes << ", weighted " << weighted << ", threshold " << threshold_logit << ", gradient "
         << with_gradient);
  const Shape shape{n, classes};
  Twin logits(gpu(), shape, random_values(shape.elements(), 331, -logit_range, logit_range));
  std::vector<float> y = random_values(shape.elements(), 332, 0.0f, 1.0f);
  for (std::size_t i = 0; i < y.size(); i += 2) y[i] = y[i] < 0.5f ? 0.0f : 1.0f;  // hard labels and soft ones
  Twin targets(gpu(), shape, y);
  Twin weights(gpu(), Shape{classes}, random_values(static_cast<std::size_t>(classes), 333, 0.5f, 3.0f));
  Twin dlogits(gpu(), shape, 334);
  TwinSums sums;
  const TwinScalars step(gpu(), StepScalars{0, 0, 1.0f / static_cast<float>(n * 2)});
  LossWorkspace cpu_ws(cpu(), Task::multilabel, shape), gpu_ws(gpu(), Task::multilabel, shape);
  cpu().sigmoid_cross_entropy(logits.cpu(), targets.cpu(), weighted ? weights.cpu() : Tensor{}, threshold_logit,
                              with_gradient ? dlogits.cpu() : Tensor{}, step.cpu(), sums.loss.cpu(),
                              sums.correct.cpu(), sums.counted.cpu(), cpu_ws.get());
  gpu().sigmoid_cross_entropy(logits.gpu(), targets.gpu(), weighted ? weights.gpu() : Tensor{}, threshold_logit,
                              with_gradient ? dlogits.gpu() : Tensor{}, step.gpu(), sums.loss.gpu(),
                              sums.correct.gpu(), sums.counted.gpu(), gpu_ws.get());
  sums.check(1e-5);
  if (with_gradient) CHECK(dlogits.relative_error() <= 1e-5);
}

void check_regression_loss(RegressionLoss kind, int n, int values, bool with_gradient) {
  INFO(to_string(kind) << ", " << n << " x " << values << ", gradient " << with_gradient);
  const Shape shape{n, values};
  Twin outputs(gpu(), shape, random_values(shape.elements(), 341, -3.0f, 3.0f));
  Twin targets(gpu(), shape, random_values(shape.elements(), 342, -3.0f, 3.0f));
  Twin doutputs(gpu(), shape, 343);
  TwinSums sums;
  const TwinScalars step(gpu(), StepScalars{0, 0, 1.0f / static_cast<float>(n)});
  LossWorkspace cpu_ws(cpu(), Task::regress, shape), gpu_ws(gpu(), Task::regress, shape);
  cpu().regression_loss(kind, 0.8f, outputs.cpu(), targets.cpu(), with_gradient ? doutputs.cpu() : Tensor{},
                        step.cpu(), sums.loss.cpu(), sums.correct.cpu(), sums.counted.cpu(), cpu_ws.get());
  gpu().regression_loss(kind, 0.8f, outputs.gpu(), targets.gpu(), with_gradient ? doutputs.gpu() : Tensor{},
                        step.gpu(), sums.loss.gpu(), sums.correct.gpu(), sums.counted.gpu(), gpu_ws.get());
  sums.check(1e-5);
  if (with_gradient) CHECK(doutputs.relative_error() <= 1e-5);
}

}  // namespace

TEST_CASE("cuda sigmoid cross-entropy matches the CPU", "[cuda][task_loss]") {
  for (bool weighted : {false, true}) {
    check_sigmoid_loss(37, 10, weighted, 0.0f, true);
    check_sigmoid_loss(3000, 7, weighted, 0.8472979f, true);  // probability 0.7
    check_sigmoid_loss(5, 1000, weighted, -1.0f, true);
    check_sigmoid_loss(64, 20, weighted, 0.0f, false);
    check_sigmoid_loss(4, 6, weighted, 0.0f, true, 1e4f);  // finite for large logits
    check_sigmoid_loss(1, 1, weighted, 0.0f, true);
  }
}

TEST_CASE("cuda regression losses match the CPU", "[cuda][task_loss]") {
  for (RegressionLoss kind : {RegressionLoss::mse, RegressionLoss::huber}) {
    check_regression_loss(kind, 37, 3, true);
    check_regression_loss(kind, 3000, 7, true);
    check_regression_loss(kind, 2, 5000, true);
    check_regression_loss(kind, 64, 1, false);
  }
}

TEST_CASE("cuda task losses give the same bits on every run", "[cuda][task_loss]") {
  const Shape shape{6, 5, 45, 51};
  Twin logits(gpu(), shape, random_values(shape.elements(), 351, -4.0f, 4.0f));
  TwinMasks masks(gpu(), random_masks(6, 45 * 51, 5, 352));
  Twin dlogits(gpu(), shape, 353);
  const TwinScalars step(gpu(), StepScalars{0, 0, 0.1f});
  std::vector<float> first_loss, first_gradient;
  for (int run = 0; run < 3; ++run) {
    TwinSums sums;
    gpu().pixel_cross_entropy(logits.gpu(), masks.gpu(), Tensor{}, dlogits.gpu(), step.gpu(), sums.loss.gpu(),
                              sums.correct.gpu(), sums.counted.gpu(), Workspace{});
    if (run == 0) {
      first_loss = sums.loss.gpu_values();
      first_gradient = dlogits.gpu_values();
    } else {
      CHECK(sums.loss.gpu_values() == first_loss);
      CHECK(dlogits.gpu_values() == first_gradient);
    }
  }

  const Shape labels{2000, 40};
  Twin x(gpu(), labels, random_values(labels.elements(), 354, -4.0f, 4.0f));
  Twin y(gpu(), labels, random_values(labels.elements(), 355, 0.0f, 1.0f));
  std::vector<float> first;
  for (int run = 0; run < 3; ++run) {
    TwinSums sums;
    gpu().sigmoid_cross_entropy(x.gpu(), y.gpu(), Tensor{}, 0.0f, Tensor{}, nullptr, sums.loss.gpu(),
                                sums.correct.gpu(), sums.counted.gpu(), Workspace{});
    if (run == 0)
      first = sums.loss.gpu_values();
    else
      CHECK(sums.loss.gpu_values() == first);
  }
}

TEST_CASE("cuda task losses need no workspace", "[cuda][task_loss]") {
  for (Task task : {Task::classify, Task::segment, Task::multilabel, Task::regress})
    CHECK(gpu().loss_workspace_bytes(task, Shape{8, 5, 16, 16}) == 0);
}
