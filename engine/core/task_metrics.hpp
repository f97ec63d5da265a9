#pragma once
// What an evaluation measures beyond the loss, for each task (base/task.hpp), counted on the host
// one sample at a time from the network's output and the sample's target: a segmentation's pixel
// accuracy and intersection over union, a multi-label's precision, recall, F1 and average
// precision, a regression's mean absolute and root mean squared errors. A trainer and a predictor
// both fill one in an evaluation (EvalResult::scores).
#include <cstddef>
#include <cstdint>
#include <vector>

#include <cnnengine/base/task.hpp>

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
  // ConfigError on a count out of range (none, or a segmentation of more than
  // kMaxSegmentationClasses) and on a threshold not strictly between 0 and 1.
  TaskMetrics(Task task, int outputs, float threshold = 0.5f);

  // One sample: the network's output for it ([K, height, width] for a segmentation, [K] or [T]
  // otherwise) and its target (base/task.hpp: a mask of height x width bytes, K or T floats).
  // height and width are a segmentation's (ConfigError unless both > 0); others pass 1, 1, and
  // they are not read. A mask byte neither a class nor kIgnoreMask is a DataError naming it, and
  // the sample then counts in nothing. A multi-label keeps every sample's scores for the average
  // precision: 5 bytes a class a sample (a float and a byte), N x K x 5 bytes in all.
  void add(const float* output, const void* target, int height, int width);
  std::size_t samples() const { return samples_; }
  // Adds what `other` counted (of the same task and outputs: ConfigError otherwise), its
  // average precision's scores too: an evaluation counts each batch apart and merges it once the
  // batch has run (a batch replayed after an out-of-memory failure counts once).
  void merge(const TaskMetrics& other);

  // The counts that add up over a data-parallel evaluation's ranks (the samples, a
  // segmentation's confusion, a multi-label's true and false positives and negatives, a
  // regression's error sums), as doubles laid out as task_metrics.cpp says: sum them over the
  // ranks and give them back with set_sums(), which replaces the counts and samples() with them
  // and so what scores() reports. Average precision needs every score and stays the rank's own.
  std::vector<double> sums() const;
  // ConfigError on a vector of another length, a negative value, a count not finite (a
  // regression's error sums may be, as a diverged network's outputs are), or a sample count that
  // is not a whole number.
  void set_sums(const std::vector<double>& sums);

  TaskScores scores() const;

 private:
  void add_segmentation(const float* output, const std::uint8_t* mask, int height, int width);
  void add_multilabel(const float* output, const void* target);
  void add_regression(const float* output, const void* target);
  double average_precision(int label) const;

  Task task_;
  int outputs_;
  float threshold_;
  std::size_t samples_ = 0;
  // segment: confusion_[true * K + predicted] over the pixels not ignored; and, for one sample,
  // each pixel's highest output so far and its class (a scratch kept between samples).
  std::vector<double> confusion_;
  std::vector<float> best_output_;
  std::vector<std::uint8_t> best_class_;
  // multilabel: per class true positives, false positives, false negatives; and every sample's
  // logits and labels ([sample * K + class]), for the average precision. Logits rank as the
  // probabilities do, without a float probability's ties where it rounds to 0 or 1.
  std::vector<double> true_positives_, false_positives_, false_negatives_;
  std::vector<float> logits_;
  std::vector<std::uint8_t> positives_;
  // regress: per target sum |y - t| and sum (y - t)^2 over the samples.
  std::vector<double> abs_error_, squared_error_;
};

}  // namespace cnn
