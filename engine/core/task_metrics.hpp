#pragma once
// What an evaluation measures beyond the loss, for each task (base/task.hpp), counted on the host
// one sample at a time from the network's output and the sample's target: a segmentation's pixel
// accuracy and intersection over union, a multi-label's precision, recall, F1 and average
// precision, a regression's mean absolute and root mean squared errors. A trainer and a predictor
// both fill one in an evaluation (EvalResult::scores).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/task.hpp"

namespace cnn {

// The scores of one evaluation. A class (or target) with nothing to score is NaN where it is
// listed, and left out of the means: a class neither in any mask nor predicted has no IoU, a
// label with no positive sample no average precision.
struct TaskScores {
  Task task = Task::classify;
  // segment: of the pixels not ignored, those predicted right; per class |pred ∩ true| /
  // |pred ∪ true| over every pixel not ignored; mean_iou over the classes that have one.
  double pixel_accuracy = 0;
  std::vector<double> iou;
  double mean_iou = 0;
  // multilabel, at the threshold: per class precision, recall and F1 (0 where their denominator
  // is 0, as scikit-learn's zero_division=0), macro F1; per class average precision (scikit-
  // learn's average_precision_score: the sum over ranks of (R_n - R_{n-1}) P_n) and its mean
  // over the classes with a positive sample.
  std::vector<double> precision, recall, f1, average_precision;
  double mean_f1 = 0, mean_average_precision = 0;
  // regress, per target and their means.
  std::vector<double> mae, rmse;
  double mean_mae = 0, mean_rmse = 0;
};

class TaskMetrics {
 public:
  // For `outputs` classes or targets; `threshold` is the multi-label's probability threshold.
  // A classification keeps nothing (its confusion matrix is ClassEvaluation's). Throws
  // ConfigError on a count out of range (a segmentation of more than kMaxSegmentationClasses).
  TaskMetrics(Task task, int outputs, float threshold = 0.5f);

  // One sample: the network's output for it ([K, height, width] for a segmentation, [K] or [T]
  // otherwise) and its target (base/task.hpp: a mask of height x width bytes, K or T floats).
  // height and width are a segmentation's; others pass 1, 1.
  void add(const float* output, const void* target, int height, int width);
  std::size_t samples() const { return samples_; }

  // The counts that add up over a data-parallel evaluation's ranks (a segmentation's confusion,
  // a multi-label's true and false positives and negatives, a regression's error sums), as
  // doubles: sum them over the ranks and give them back with set_sums(). Average precision needs
  // every score and is the rank's own.
  std::vector<double> sums() const;
  void set_sums(const std::vector<double>& sums);  // ConfigError on a vector of another length

  TaskScores scores() const;

 private:
  Task task_;
  int outputs_;
  float threshold_;
  std::size_t samples_ = 0;
  // segment: confusion_[true * K + predicted] over the pixels not ignored.
  std::vector<double> confusion_;
  // multilabel: per class true positives, false positives, false negatives; and every sample's
  // probability and label, for the average precision.
  std::vector<double> true_positives_, false_positives_, false_negatives_;
  std::vector<float> probabilities_;
  std::vector<std::uint8_t> positives_;
  // regress: per target sum |y - t|, sum (y - t)^2, count.
  std::vector<double> abs_error_, squared_error_;
  double counted_ = 0;
};

}  // namespace cnn
