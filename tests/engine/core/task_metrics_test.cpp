// The metrics of a segmentation, a multi-label and a regression against small cases worked by
// hand (scikit-learn's definitions), and their sums over data-parallel ranks.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <cnnengine/base/error.hpp>
#include <cnnengine/engine/core/task_metrics.hpp>

using namespace cnn;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

float logit_of(double probability) { return static_cast<float>(std::log(probability / (1 - probability))); }

// Samples of [K] logits and K float labels, one row each.
TaskMetrics multilabel_of(const std::vector<std::vector<float>>& logits, const std::vector<std::vector<float>>& labels,
                          float threshold = 0.5f) {
  TaskMetrics m(Task::multilabel, static_cast<int>(logits.front().size()), threshold);
  for (std::size_t s = 0; s < logits.size(); ++s) m.add(logits[s].data(), labels[s].data(), 1, 1);
  return m;
}

// One class's average precision from its samples' logits and 0/1 labels.
double average_precision_of(const std::vector<float>& logits, const std::vector<float>& labels) {
  TaskMetrics m(Task::multilabel, 1);
  for (std::size_t s = 0; s < logits.size(); ++s) m.add(&logits[s], &labels[s], 1, 1);
  return m.scores().average_precision.at(0);
}

std::vector<double> added(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  std::vector<double> sum(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) sum[i] = a[i] + b[i];
  return sum;
}

// A 2 x 3 image of 3 classes. Predicted (channel-major argmax): 0 1 0 / 1 1 0, pixel (0, 2) a tie
// of classes 0 and 1 that goes to 0. True: 0 1 1 / 0 ignored 0. Class 2 is nowhere.
const std::vector<float> kSegmentOutput = {
    2, 0, 1,   0, 0, 3,    // class 0
    1, 2, 1,   3, 5, 0,    // class 1
    0, 0, 0.5, 0, 0, 0};   // class 2
const std::vector<std::uint8_t> kSegmentMask = {0, 1, 1, 0, kIgnoreMask, 0};

}  // namespace

TEST_CASE("segmentation: pixel accuracy and IoU skip ignored pixels, a tie goes to the first class, an absent class has no IoU",
          "[task_metrics]") {
  TaskMetrics m(Task::segment, 3);
  m.add(kSegmentOutput.data(), kSegmentMask.data(), 2, 3);
  CHECK(m.samples() == 1);
  // Counted pixels (true, predicted): (0,0) (1,1) (1,0) (0,1) (0,0): confusion [[2,1,0],[1,1,0],[0,0,0]].
  const std::vector<double> sums = m.sums();
  REQUIRE(sums.size() == 1 + 9);
  CHECK(sums == std::vector<double>{1, 2, 1, 0, 1, 1, 0, 0, 0, 0});
  const TaskScores s = m.scores();
  CHECK(s.task == Task::segment);
  CHECK(s.pixel_accuracy == Approx(3.0 / 5));
  REQUIRE(s.iou.size() == 3);
  CHECK(s.iou[0] == Approx(2.0 / (3 + 3 - 2)));
  CHECK(s.iou[1] == Approx(1.0 / (2 + 2 - 1)));
  CHECK(std::isnan(s.iou[2]));
  CHECK(s.mean_iou == Approx((0.5 + 1.0 / 3) / 2));
  CHECK(s.precision.empty());
  CHECK(s.mae.empty());
}

TEST_CASE("segmentation: equal highest outputs of later classes go to the first of them", "[task_metrics]") {
  TaskMetrics m(Task::segment, 3);
  const std::vector<float> output = {0, 4, 4};  // one pixel: classes 1 and 2 tie
  const std::uint8_t truth = 2;
  m.add(output.data(), &truth, 1, 1);
  CHECK(m.sums() == std::vector<double>{1, 0, 0, 0, 0, 0, 0, 0, 1, 0});
  const TaskScores s = m.scores();
  CHECK(s.pixel_accuracy == 0);
  CHECK(std::isnan(s.iou[0]));
  CHECK(s.iou[1] == 0);
  CHECK(s.iou[2] == 0);
  CHECK(s.mean_iou == 0);
}

TEST_CASE("segmentation: a mask byte beyond the classes is a DataError naming it and counts nothing", "[task_metrics]") {
  TaskMetrics m(Task::segment, 3);
  std::vector<std::uint8_t> mask = kSegmentMask;
  mask[3] = 7;
  CHECK_THROWS_AS(m.add(kSegmentOutput.data(), mask.data(), 2, 3), DataError);
  CHECK_THROWS_WITH(m.add(kSegmentOutput.data(), mask.data(), 2, 3),
                    Catch::Contains("mask value 7 at row 1, column 0") && Catch::Contains("3 classes") &&
                        Catch::Contains("255"));
  mask[3] = 3;  // the class count itself
  CHECK_THROWS_WITH(m.add(kSegmentOutput.data(), mask.data(), 2, 3), Catch::Contains("mask value 3"));
  CHECK(m.samples() == 0);
  CHECK(m.sums() == std::vector<double>(10, 0.0));
  const TaskScores s = m.scores();
  CHECK(s.pixel_accuracy == 0);
  CHECK(s.mean_iou == 0);
  for (double iou : s.iou) CHECK(std::isnan(iou));
  // A mask of nothing but ignored pixels counts a sample and no pixel.
  const std::vector<std::uint8_t> ignored(6, kIgnoreMask);
  m.add(kSegmentOutput.data(), ignored.data(), 2, 3);
  CHECK(m.samples() == 1);
  CHECK(m.scores().pixel_accuracy == 0);
}

TEST_CASE("task metrics refuse counts, thresholds and samples out of range", "[task_metrics]") {
  CHECK_THROWS_AS(TaskMetrics(Task::segment, 0), ConfigError);
  CHECK_THROWS_AS(TaskMetrics(Task::regress, -1), ConfigError);
  CHECK_THROWS_AS(TaskMetrics(Task::classify, 0), ConfigError);
  CHECK_THROWS_WITH(TaskMetrics(Task::segment, 256), Catch::Contains("256 classes") && Catch::Contains("at most 255"));
  CHECK_NOTHROW(TaskMetrics(Task::segment, kMaxSegmentationClasses));
  CHECK_THROWS_AS(TaskMetrics(Task::multilabel, 2, 0.0f), ConfigError);
  CHECK_THROWS_AS(TaskMetrics(Task::multilabel, 2, 1.0f), ConfigError);
  CHECK_THROWS_WITH(TaskMetrics(Task::multilabel, 2, kNaN), Catch::Contains("threshold"));
  TaskMetrics segment(Task::segment, 3);
  CHECK_THROWS_AS(segment.add(kSegmentOutput.data(), kSegmentMask.data(), 0, 3), ConfigError);
  CHECK_THROWS_AS(segment.add(kSegmentOutput.data(), nullptr, 2, 3), ConfigError);
  CHECK(segment.samples() == 0);
}

TEST_CASE("multi-label: precision, recall and F1 at the threshold, 0 where a denominator is 0", "[task_metrics]") {
  // Class 0: labels 0 0 1 1, probabilities 0.1 0.4 0.35 0.8: one true positive, one false negative.
  // Class 1: no positive, two predicted: precision 0/2, recall 0/0.
  // Class 2: one positive, none predicted: precision 0/0, recall 0/1.
  const TaskMetrics m = multilabel_of({{logit_of(0.1), 2, -1}, {logit_of(0.4), -1, -2}, {logit_of(0.35), 3, -3},
                                       {logit_of(0.8), -2, -4}},
                                      {{0, 0, 1}, {0, 0, 0}, {1, 0, 0}, {1, 0, 0}});
  CHECK(m.samples() == 4);
  CHECK(m.sums() == std::vector<double>{4, 1, 0, 0, 0, 2, 0, 1, 0, 1});
  const TaskScores s = m.scores();
  CHECK(s.task == Task::multilabel);
  CHECK(s.precision == std::vector<double>{1, 0, 0});
  CHECK(s.recall == std::vector<double>{0.5, 0, 0});
  CHECK(s.f1[0] == Approx(2 * 1 * 0.5 / 1.5));
  CHECK(s.f1[1] == 0);
  CHECK(s.f1[2] == 0);
  CHECK(s.mean_f1 == Approx(2.0 / 3 / 3));
  // scikit-learn's average_precision_score([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]) = 0.8333...
  CHECK(s.average_precision[0] == Approx(0.5 * 1 + 0.5 * 2.0 / 3));
  CHECK(std::isnan(s.average_precision[1]));
  CHECK(s.average_precision[2] == Approx(1.0));  // the positive has the highest score
  CHECK(s.mean_average_precision == Approx((5.0 / 6 + 1) / 2));
  CHECK(s.iou.empty());
}

TEST_CASE("multi-label: average precision takes tied scores as one threshold, whatever their order", "[task_metrics]") {
  // scikit-learn: average_precision_score([1, 0, 1, 0], [0.5, 0.5, 0.5, 0.2]) = 2/3; counting the tied
  // samples one at a time would give 0.833, 0.583 or 1 by their order.
  CHECK(average_precision_of({0, 0, 0, -1}, {1, 0, 1, 0}) == Approx(2.0 / 3));
  CHECK(average_precision_of({0, 0, 0, -1}, {0, 1, 1, 0}) == Approx(2.0 / 3));
  CHECK(average_precision_of({0, 0, 0, -1}, {1, 1, 0, 0}) == Approx(2.0 / 3));
  // All tied: one threshold, precision the positives' share.
  CHECK(average_precision_of({1, 1, 1, 1}, {1, 0, 0, 0}) == Approx(0.25));
}

TEST_CASE("multi-label: huge logits neither overflow nor tie, a NaN ranks last, the threshold is strict",
          "[task_metrics]") {
  const TaskMetrics m = multilabel_of({{1000, -1000}, {-1000, 0}}, {{1, 0}, {0, 1}});
  const TaskScores s = m.scores();
  CHECK(s.precision == std::vector<double>{1, 0});
  CHECK(s.recall == std::vector<double>{1, 0});  // a logit of 0 is probability 0.5: not above 0.5
  CHECK(s.f1[0] == Approx(1.0));
  CHECK(m.sums() == std::vector<double>{2, 1, 0, 0, 0, 0, 1});
  // Both probabilities round to 1 as floats; their logits still rank them.
  CHECK(average_precision_of({40, 50}, {0, 1}) == Approx(1.0));
  // Ranked 2 (positive), 1 (negative), NaN (positive): 0.5 * 1 + 0.5 * 2/3.
  CHECK(average_precision_of({kNaN, 2, 1}, {1, 1, 0}) == Approx(5.0 / 6));
  // Another threshold moves the predictions.
  const TaskMetrics high = multilabel_of({{logit_of(0.7)}, {logit_of(0.95)}}, {{1}, {1}}, 0.9f);
  CHECK(high.scores().recall == std::vector<double>{0.5});
}

TEST_CASE("regression: per target mean absolute and root mean squared errors, 0 on no sample", "[task_metrics]") {
  TaskMetrics m(Task::regress, 2);
  const TaskScores none = m.scores();
  CHECK(none.mae == std::vector<double>{0, 0});
  CHECK(none.rmse == std::vector<double>{0, 0});
  CHECK(none.mean_mae == 0);
  CHECK(none.mean_rmse == 0);
  const std::vector<float> output1 = {1, 2}, target1 = {0, 4}, output2 = {3, -1}, target2 = {3, 1};
  m.add(output1.data(), target1.data(), 1, 1);
  m.add(output2.data(), target2.data(), 1, 1);
  // Errors: target 0: 1, 0; target 1: -2, -2.
  CHECK(m.sums() == std::vector<double>{2, 1, 4, 1, 8});
  const TaskScores s = m.scores();
  CHECK(s.task == Task::regress);
  CHECK(s.mae[0] == Approx(0.5));
  CHECK(s.mae[1] == Approx(2));
  CHECK(s.rmse[0] == Approx(std::sqrt(0.5)));
  CHECK(s.rmse[1] == Approx(2));
  CHECK(s.mean_mae == Approx(1.25));
  CHECK(s.mean_rmse == Approx((std::sqrt(0.5) + 2) / 2));
  CHECK(s.precision.empty());
}

TEST_CASE("classification: task metrics keep nothing but the samples", "[task_metrics]") {
  TaskMetrics m(Task::classify, 10);
  m.add(nullptr, nullptr, 1, 1);
  CHECK(m.samples() == 1);
  CHECK(m.sums() == std::vector<double>{1});
  const TaskScores s = m.scores();
  CHECK(s.task == Task::classify);
  CHECK(s.iou.empty());
  CHECK(s.precision.empty());
  CHECK(s.average_precision.empty());
  CHECK(s.mae.empty());
  m.set_sums({5});
  CHECK(m.samples() == 5);
}

TEST_CASE("task metrics summed over two ranks score as one rank that saw every sample", "[task_metrics]") {
  SECTION("segmentation") {
    TaskMetrics rank0(Task::segment, 3), rank1(Task::segment, 3), all(Task::segment, 3);
    const std::vector<float> output = {0, 4, 4};
    const std::uint8_t truth = 2;
    rank0.add(kSegmentOutput.data(), kSegmentMask.data(), 2, 3);
    rank1.add(output.data(), &truth, 1, 1);
    all.add(kSegmentOutput.data(), kSegmentMask.data(), 2, 3);
    all.add(output.data(), &truth, 1, 1);
    rank0.set_sums(added(rank0.sums(), rank1.sums()));
    CHECK(rank0.samples() == 2);
    CHECK(rank0.sums() == all.sums());
    const TaskScores reduced = rank0.scores(), expected = all.scores();
    CHECK(reduced.pixel_accuracy == Approx(3.0 / 6));
    CHECK(reduced.pixel_accuracy == expected.pixel_accuracy);
    CHECK(reduced.iou[2] == Approx(0.0));  // class 2 is now in a mask
    CHECK(reduced.mean_iou == expected.mean_iou);
  }
  SECTION("multi-label: the counts add up, the average precision stays the rank's own") {
    const TaskMetrics rank1 = multilabel_of({{logit_of(0.9), -3}, {-1, 3}}, {{1, 0}, {1, 1}});
    TaskMetrics rank0 = multilabel_of({{logit_of(0.1), 2}, {logit_of(0.8), 1}}, {{0, 0}, {1, 1}});
    const TaskMetrics all = multilabel_of({{logit_of(0.1), 2}, {logit_of(0.8), 1}, {logit_of(0.9), -3}, {-1, 3}},
                                          {{0, 0}, {1, 1}, {1, 0}, {1, 1}});
    const TaskScores own = rank0.scores();
    rank0.set_sums(added(rank0.sums(), rank1.sums()));
    CHECK(rank0.samples() == 4);
    CHECK(rank0.sums() == all.sums());
    const TaskScores reduced = rank0.scores(), expected = all.scores();
    CHECK(reduced.precision == expected.precision);
    CHECK(reduced.recall == expected.recall);
    CHECK(reduced.f1 == expected.f1);
    CHECK(reduced.mean_f1 == expected.mean_f1);
    CHECK(reduced.recall[0] == Approx(2.0 / 3));
    CHECK(reduced.average_precision == own.average_precision);
  }
  SECTION("regression") {
    TaskMetrics rank0(Task::regress, 1), rank1(Task::regress, 1);
    const float y0 = 1, t0 = 0, y1 = 5, t1 = 2;
    rank0.add(&y0, &t0, 1, 1);
    rank1.add(&y1, &t1, 1, 1);
    rank0.set_sums(added(rank0.sums(), rank1.sums()));
    const TaskScores s = rank0.scores();
    CHECK(s.mae[0] == Approx((1.0 + 3) / 2));
    CHECK(s.rmse[0] == Approx(std::sqrt((1.0 + 9) / 2)));
  }
}

TEST_CASE("set_sums refuses sums of another shape or that are not counts", "[task_metrics]") {
  TaskMetrics segment(Task::segment, 3);
  CHECK_THROWS_WITH(segment.set_sums(std::vector<double>(9, 0.0)),
                    Catch::Contains("9 values") && Catch::Contains("which have 10"));
  std::vector<double> sums(10, 0.0);
  sums[0] = 1.5;
  CHECK_THROWS_WITH(segment.set_sums(sums), Catch::Contains("not a whole number"));
  sums[0] = -1;
  CHECK_THROWS_AS(segment.set_sums(sums), ConfigError);
  sums[0] = 1;
  sums[4] = -2;
  CHECK_THROWS_AS(segment.set_sums(sums), ConfigError);
  sums[4] = std::numeric_limits<double>::infinity();
  CHECK_THROWS_AS(segment.set_sums(sums), ConfigError);
  CHECK(segment.samples() == 0);
  CHECK(segment.sums() == std::vector<double>(10, 0.0));
  // A diverged regression's error sums are what they are.
  TaskMetrics regress(Task::regress, 1);
  regress.set_sums({2, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()});
  CHECK(regress.samples() == 2);
  CHECK(std::isnan(regress.scores().mae[0]));
  CHECK(std::isinf(regress.scores().rmse[0]));
}
