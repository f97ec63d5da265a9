// Inference through the trainer: logits for a batch, and the per-class evaluation, agreeing with
// the evaluation's own loss and accuracy.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "cnnengine/backends/cpu/cpu_backend.hpp"
#include "cnnengine/memory/host_resource.hpp"
#include "cnnengine/models/presets.hpp"
#include "test_networks.hpp"

using namespace cnn;
using cnn::testing::SyntheticData;

TEST_CASE("predict gives the logits evaluate scores; evaluate_classes adds the confusion matrix", "[trainer][inference]") {
  const Shape image{1, 12, 12};
  constexpr int kClasses = 4, kSamples = 40;
  CpuBackend backend(2);
  for (const char* model : {"small", "small-bn"}) {
    INFO(model);
    Network net = make_preset(model, image, kClasses);
    TrainerOptions o = testing::constant_sgd(16);
    Trainer trainer(net, backend, memory::host_resource(), o);
    const SyntheticData data(kSamples + 48, image, kClasses, 3);
    for (int s = 0; s < 3; ++s) trainer.train_step(data.batch(s * 16, 16));

    auto batches = [&] {
      return [&, next = 0]() mutable -> std::optional<HostBatch> {
        if (next == kSamples) return std::nullopt;
        const int size = std::min(16, kSamples - next);  // 16 + 16 + 8
        const HostBatch b = data.batch(48 + next, size);
        next += size;
        return b;
      };
    };
    const EvalResult plain = trainer.evaluate(batches());
    const ClassEvaluation classes = trainer.evaluate_classes(batches());
    CHECK(classes.samples == kSamples);
    CHECK(classes.loss == plain.loss);
    CHECK(classes.accuracy == plain.accuracy);

    std::vector<float> logits(kSamples * kClasses);
    trainer.predict(data.images.data() + 48 * image.elements(), kSamples, logits.data());
    double loss = 0;
    std::size_t right = 0, total = 0;
    std::vector<std::vector<std::size_t>> confusion(kClasses, std::vector<std::size_t>(kClasses, 0));
    for (int i = 0; i < kSamples; ++i) {
      const float* row = logits.data() + i * kClasses;
      const int label = data.labels[static_cast<std::size_t>(48 + i)];
      const float top = *std::max_element(row, row + kClasses);
      double sum = 0;
      for (int c = 0; c < kClasses; ++c) sum += std::exp(static_cast<double>(row[c] - top));
      loss += std::log(sum) - (row[label] - top);
      const int predicted = static_cast<int>(std::max_element(row, row + kClasses) - row);
      right += predicted == label;
      ++confusion[static_cast<std::size_t>(label)][static_cast<std::size_t>(predicted)];
    }
    CHECK(loss / kSamples == Approx(plain.loss).epsilon(1e-5));
    CHECK(static_cast<double>(right) / kSamples == plain.accuracy);
    CHECK(confusion == classes.confusion);
    for (const auto& row : classes.confusion)
      for (std::size_t n : row) total += n;
    CHECK(total == kSamples);
    for (int c = 0; c < kClasses; ++c) {
      CHECK(classes.recall(c) >= 0.0);
      CHECK(classes.class_accuracy(c) >= classes.accuracy);  // one against the rest is easier
    }
  }
}

TEST_CASE("per-class precision, recall and accuracy from a known confusion matrix", "[inference]") {
  ClassEvaluation e;
  e.confusion = {{8, 2, 0}, {1, 6, 3}, {0, 0, 10}};  // rows: true class; 30 samples, 24 right
  CHECK(e.precision(0) == Approx(8.0 / 9.0));
  CHECK(e.recall(0) == Approx(0.8));
  CHECK(e.precision(2) == Approx(10.0 / 13.0));
  CHECK(e.recall(1) == Approx(0.6));
  CHECK(e.class_accuracy(1) == Approx((30.0 - 1 - 3 - 2) / 30.0));
}
