// Fused softmax cross-entropy against the CPU backend, with and without label smoothing: loss and
// accuracy accumulate, gradient is scaled, and a label out of range surfaces as a DataError at the
// next synchronisation.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <stdexcept>

#include "support.hpp"

#include <cnnengine/base/error.hpp>

using namespace cnn;
using namespace cnn::cuda_test;

namespace {

std::vector<std::int32_t> random_labels(int n, int classes, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> dist(0, classes - 1);
  std::vector<std::int32_t> labels(static_cast<std::size_t>(n));
  for (auto& l : labels) l = dist(rng);
  return labels;
}

void check_loss(int n, int classes, bool with_gradient, float smoothing = 0.0f) {
  INFO(n << " samples, " << classes << " classes, gradient " << with_gradient << ", label smoothing " << smoothing);
  const Shape ls{n, classes};
  // Spread wide enough that some argmax predictions hit the label and some do not.
  Twin logits(gpu(), ls, random_values(ls.elements(), 81, -4.0f, 4.0f));
  TwinLabels labels(gpu(), random_labels(n, classes, 82));
  Twin dlogits(gpu(), ls, 83);
  Twin loss_sum(gpu(), Shape{1}, std::vector<float>{1.5f});  // earlier micro-batches' sums
  Twin correct(gpu(), Shape{1}, std::vector<float>{2.0f});
  const TwinScalars step(gpu(), StepScalars{0, 0, 1.0f / static_cast<float>(n * 3)});
  cpu().softmax_cross_entropy(logits.cpu(), labels.cpu(), smoothing, with_gradient ? dlogits.cpu() : Tensor{},
                              step.cpu(), loss_sum.cpu(), correct.cpu());
  gpu().softmax_cross_entropy(logits.gpu(), labels.gpu(), smoothing, with_gradient ? dlogits.gpu() : Tensor{},
                              step.gpu(), loss_sum.gpu(), correct.gpu());
  CHECK(loss_sum.relative_error() <= 1e-5);
  CHECK(correct.gpu_values() == correct.cpu_values());
  if (with_gradient) CHECK(dlogits.relative_error() <= 1e-5);
}

}  // namespace

TEST_CASE("cuda softmax cross-entropy matches the CPU", "[cuda][loss]") {
  check_loss(37, 10, true);
  check_loss(256, 10, true);
  check_loss(5, 1000, true);
  check_loss(3000, 7, true);
  check_loss(64, 10, false);
  check_loss(1, 1, true);
}

TEST_CASE("cuda softmax cross-entropy with label smoothing matches the CPU", "[cuda][loss]") {
  for (float smoothing : {0.1f, 0.45f}) {
    check_loss(37, 10, true, smoothing);
    check_loss(5, 1000, true, smoothing);
    check_loss(3000, 7, true, smoothing);
    check_loss(64, 10, false, smoothing);
    check_loss(1, 1, true, smoothing);
  }
}

TEST_CASE("cuda softmax cross-entropy refuses label smoothing below 0, from 1 on, or NaN", "[cuda][loss]") {
  Twin logits(gpu(), Shape{2, 3}, 88), loss_sum(gpu(), Shape{1}, 89), correct(gpu(), Shape{1}, 90);
  TwinLabels labels(gpu(), {0, 2});
  for (float smoothing : {-0.1f, 1.0f}) {
    CAPTURE(smoothing);
    CHECK_THROWS_AS(gpu().softmax_cross_entropy(logits.gpu(), labels.gpu(), smoothing, Tensor{}, nullptr,
                                                loss_sum.gpu(), correct.gpu()),
                    ConfigError);
  }
}

TEST_CASE("cuda softmax cross-entropy reports a label out of range on synchronize", "[cuda][loss]") {
  const Shape ls{4, 10};
  Twin logits(gpu(), ls, 84), dlogits(gpu(), ls, 85);
  Twin loss_sum(gpu(), Shape{1}, 86), correct(gpu(), Shape{1}, 87);
  const TwinScalars step(gpu(), StepScalars{0, 0, 1.0f});
  TwinLabels bad(gpu(), {1, 2, 10, 3});
  gpu().softmax_cross_entropy(logits.gpu(), bad.gpu(), 0.0f, dlogits.gpu(), step.gpu(), loss_sum.gpu(), correct.gpu());
  CHECK_THROWS_AS(gpu().synchronize(), DataError);

  TwinLabels negative(gpu(), {1, -1, 0, 3});
  gpu().softmax_cross_entropy(logits.gpu(), negative.gpu(), 0.0f, dlogits.gpu(), step.gpu(), loss_sum.gpu(), correct.gpu());
  std::vector<float> host(1);
  CHECK_THROWS_AS(gpu().copy_to_host(loss_sum.gpu().data, host.data(), sizeof(float)), DataError);

  // Reported once: the backend goes on working.
  TwinLabels good(gpu(), {1, 2, 9, 0});
  gpu().softmax_cross_entropy(logits.gpu(), good.gpu(), 0.0f, dlogits.gpu(), step.gpu(), loss_sum.gpu(), correct.gpu());
  CHECK_NOTHROW(gpu().synchronize());
}
