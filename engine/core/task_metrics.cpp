// The metrics of a segmentation, a multi-label and a regression, counted one sample at a time.
//
// sums() lays the additive counts out end to end, each block row-major:
//   [0]                   samples
//   segment:    [1, 1 + K*K)          confusion[true * K + predicted]
//   multilabel: [1, 1 + 3K)           true positives, false positives, false negatives, K each
//   regress:    [1, 1 + 2T)           sum |y - t|, sum (y - t)^2, T each
//   classify:   nothing after the samples
#include <cnnengine/engine/core/task_metrics.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>

#include <cnnengine/base/error.hpp>

namespace cnn {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::size_t counts_per_output(Task task, int outputs) {
  switch (task) {
    case Task::segment: return static_cast<std::size_t>(outputs);
    case Task::multilabel: return 3;
    case Task::regress: return 2;
    case Task::classify: return 0;
  }
  return 0;
}

std::size_t sums_length(Task task, int outputs) {
  return 1 + counts_per_output(task, outputs) * static_cast<std::size_t>(outputs);
}

double sigmoid(float logit) {
  const double x = logit;
  if (x >= 0) return 1 / (1 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1 + e);
}

float read_float(const void* values, std::size_t i) {
  float v;
  std::memcpy(&v, static_cast<const unsigned char*>(values) + i * sizeof(float), sizeof v);
  return v;
}

double mean_of_numbers(const std::vector<double>& values) {
  double sum = 0;
  std::size_t n = 0;
  for (double v : values)
    if (!std::isnan(v)) {
      sum += v;
      ++n;
    }
  return n ? sum / static_cast<double>(n) : 0.0;
}

double ratio_or_zero(double numerator, double denominator) {
  return denominator > 0 ? numerator / denominator : 0.0;
}

// Higher first; a NaN (a diverged network's output) ranks below every number, so that sorting
// never sees an order that is not one.
bool ranks_before(float a, float b) { return a > b || (!std::isnan(a) && std::isnan(b)); }
bool same_rank(float a, float b) { return a == b || (std::isnan(a) && std::isnan(b)); }

void copy_block(std::vector<double>& to, const std::vector<double>& sums, std::size_t& at) {
  std::copy_n(sums.begin() + static_cast<std::ptrdiff_t>(at), to.size(), to.begin());
  at += to.size();
}

}  // namespace

TaskMetrics::TaskMetrics(Task task, int outputs, float threshold)
    : task_(task), outputs_(outputs), threshold_(threshold) {
  if (outputs <= 0)
    throw ConfigError("task metrics of " + std::to_string(outputs) + " " + to_string(task) +
                      " outputs: at least 1 is needed");
  if (task == Task::segment && outputs > kMaxSegmentationClasses)
    throw ConfigError("a segmentation of " + std::to_string(outputs) + " classes: at most " +
                      std::to_string(kMaxSegmentationClasses) + " fit a mask's byte beside the ignore value");
  if (!(threshold > 0 && threshold < 1))
    throw ConfigError("threshold " + std::to_string(threshold) + " is not between 0 and 1");
  const auto k = static_cast<std::size_t>(outputs);
  switch (task) {
    case Task::segment: confusion_.assign(k * k, 0); break;
    case Task::multilabel:
      true_positives_.assign(k, 0);
      false_positives_.assign(k, 0);
      false_negatives_.assign(k, 0);
      break;
    case Task::regress:
      abs_error_.assign(k, 0);
      squared_error_.assign(k, 0);
      break;
    case Task::classify: break;
  }
}

void TaskMetrics::add(const float* output, const void* target, int height, int width) {
  if (task_ != Task::classify && (output == nullptr || target == nullptr))
    throw ConfigError("a " + to_string(task_) + " sample's metrics need its output and its target");
  switch (task_) {
    case Task::segment: add_segmentation(output, static_cast<const std::uint8_t*>(target), height, width); break;
    case Task::multilabel: add_multilabel(output, target); break;
    case Task::regress: add_regression(output, target); break;
    case Task::classify: break;
  }
  ++samples_;
}

void TaskMetrics::add_segmentation(const float* output, const std::uint8_t* mask, int height, int width) {
  if (height <= 0 || width <= 0)
    throw ConfigError("a segmentation sample of " + std::to_string(height) + " x " + std::to_string(width) +
                      " pixels");
  const auto pixels = static_cast<std::size_t>(height) * static_cast<std::size_t>(width);
  const auto classes = static_cast<std::size_t>(outputs_);
  // Every byte is checked before any is counted: a bad mask leaves the counts as they were.
  for (std::size_t p = 0; p < pixels; ++p)
    if (mask[p] != kIgnoreMask && mask[p] >= classes)
      throw DataError("mask value " + std::to_string(mask[p]) + " at row " + std::to_string(p / static_cast<std::size_t>(width)) +
                      ", column " + std::to_string(p % static_cast<std::size_t>(width)) + " is neither one of the " +
                      std::to_string(classes) + " classes (0 to " + std::to_string(classes - 1) +
                      ") nor the ignore value " + std::to_string(kIgnoreMask));
  // A class plane at a time, as the output lies: the first of equal highest outputs wins.
  best_output_.assign(output, output + pixels);
  best_class_.assign(pixels, 0);
  for (std::size_t k = 1; k < classes; ++k) {
    const float* plane = output + k * pixels;
    for (std::size_t p = 0; p < pixels; ++p)
      if (plane[p] > best_output_[p]) {
        best_output_[p] = plane[p];
        best_class_[p] = static_cast<std::uint8_t>(k);
      }
  }
  for (std::size_t p = 0; p < pixels; ++p)
    if (mask[p] != kIgnoreMask) confusion_[static_cast<std::size_t>(mask[p]) * classes + best_class_[p]] += 1;
}

void TaskMetrics::add_multilabel(const float* output, const void* target) {
  for (int k = 0; k < outputs_; ++k) {
    const auto i = static_cast<std::size_t>(k);
    const bool predicted = sigmoid(output[i]) > threshold_;
    const bool positive = read_float(target, i) > 0.5f;
    if (predicted && positive) true_positives_[i] += 1;
    if (predicted && !positive) false_positives_[i] += 1;
    if (!predicted && positive) false_negatives_[i] += 1;
    logits_.push_back(output[i]);
    positives_.push_back(positive ? 1 : 0);
  }
}

void TaskMetrics::add_regression(const float* output, const void* target) {
  for (int t = 0; t < outputs_; ++t) {
    const auto i = static_cast<std::size_t>(t);
    const double error = static_cast<double>(output[i]) - static_cast<double>(read_float(target, i));
    abs_error_[i] += std::abs(error);
    squared_error_[i] += error * error;
  }
}

void TaskMetrics::merge(const TaskMetrics& other) {
  if (other.task_ != task_ || other.outputs_ != outputs_)
    throw ConfigError("TaskMetrics::merge: the counts of a " + to_string(other.task_) + " of " +
                      std::to_string(other.outputs_) + " outputs into a " + to_string(task_) + " of " +
                      std::to_string(outputs_));
  std::vector<double> counts = sums();
  const std::vector<double> more = other.sums();
  for (std::size_t i = 0; i < counts.size(); ++i) counts[i] += more[i];
  set_sums(counts);
  logits_.insert(logits_.end(), other.logits_.begin(), other.logits_.end());
  positives_.insert(positives_.end(), other.positives_.begin(), other.positives_.end());
}

std::vector<double> TaskMetrics::sums() const {
  std::vector<double> out;
  out.reserve(sums_length(task_, outputs_));
  out.push_back(static_cast<double>(samples_));
  for (const auto* block : {&confusion_, &true_positives_, &false_positives_, &false_negatives_, &abs_error_,
                            &squared_error_})
    out.insert(out.end(), block->begin(), block->end());
  return out;
}

void TaskMetrics::set_sums(const std::vector<double>& sums) {
  const std::size_t length = sums_length(task_, outputs_);
  if (sums.size() != length)
    throw ConfigError("sums of " + std::to_string(sums.size()) + " values for " + to_string(task_) +
                      " metrics of " + std::to_string(outputs_) + " outputs, which have " + std::to_string(length));
  // 2^53: the doubles beyond it are not every whole number.
  const double samples = sums[0];
  if (!(samples >= 0 && samples <= 9007199254740992.0 && samples == std::floor(samples)))
    throw ConfigError("sums give " + std::to_string(samples) + " samples, not a whole number");
  // A regression's error sums may be infinite or NaN, as a diverged network's outputs are; counts may not.
  for (std::size_t i = 1; i < length; ++i)
    if (sums[i] < 0 || (task_ != Task::regress && !std::isfinite(sums[i])))
      throw ConfigError("sum " + std::to_string(i) + " of the " + to_string(task_) + " metrics is " +
                        std::to_string(sums[i]) + ", not a count");
  samples_ = static_cast<std::size_t>(samples);
  std::size_t at = 1;
  for (auto* block : {&confusion_, &true_positives_, &false_positives_, &false_negatives_, &abs_error_,
                      &squared_error_})
    copy_block(*block, sums, at);
}

double TaskMetrics::average_precision(int label) const {
  const auto classes = static_cast<std::size_t>(outputs_);
  const std::size_t n = logits_.size() / classes;
  std::vector<float> logits(n);
  std::vector<std::uint8_t> positive(n);
  double positives = 0;
  for (std::size_t s = 0; s < n; ++s) {
    logits[s] = logits_[s * classes + static_cast<std::size_t>(label)];
    positive[s] = positives_[s * classes + static_cast<std::size_t>(label)];
    positives += positive[s];
  }
  if (positives == 0) return kNaN;
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return ranks_before(logits[a], logits[b]); });
  // Each distinct score is a threshold: the samples tied at it enter together.
  double true_positives = 0, false_positives = 0, last_recall = 0, sum = 0;
  for (std::size_t r = 0; r < n; ++r) {
    (positive[order[r]] ? true_positives : false_positives) += 1;
    if (r + 1 < n && same_rank(logits[order[r]], logits[order[r + 1]])) continue;
    const double recall = true_positives / positives;
    sum += (recall - last_recall) * true_positives / (true_positives + false_positives);
    last_recall = recall;
  }
  return sum;
}

TaskScores TaskMetrics::scores() const {
  TaskScores s;
  s.task = task_;
  const auto k = static_cast<std::size_t>(outputs_);
  const auto n = static_cast<double>(samples_);
  switch (task_) {
    case Task::segment: {
      std::vector<double> predicted(k, 0), actual(k, 0);
      double total = 0, right = 0;
      for (std::size_t t = 0; t < k; ++t)
        for (std::size_t p = 0; p < k; ++p) {
          const double c = confusion_[t * k + p];
          actual[t] += c;
          predicted[p] += c;
          total += c;
          if (t == p) right += c;
        }
      s.pixel_accuracy = ratio_or_zero(right, total);
      s.iou.resize(k);
      for (std::size_t c = 0; c < k; ++c) {
        const double both = confusion_[c * k + c];
        const double either = actual[c] + predicted[c] - both;
        s.iou[c] = either > 0 ? both / either : kNaN;
      }
      s.mean_iou = mean_of_numbers(s.iou);
      break;
    }
    case Task::multilabel:
      s.precision.resize(k);
      s.recall.resize(k);
      s.f1.resize(k);
      s.average_precision.resize(k);
      for (std::size_t c = 0; c < k; ++c) {
        const double tp = true_positives_[c];
        s.precision[c] = ratio_or_zero(tp, tp + false_positives_[c]);
        s.recall[c] = ratio_or_zero(tp, tp + false_negatives_[c]);
        s.f1[c] = ratio_or_zero(2 * s.precision[c] * s.recall[c], s.precision[c] + s.recall[c]);
        s.average_precision[c] = average_precision(static_cast<int>(c));
      }
      s.mean_f1 = std::accumulate(s.f1.begin(), s.f1.end(), 0.0) / static_cast<double>(k);
      s.mean_average_precision = mean_of_numbers(s.average_precision);
      break;
    case Task::regress:
      s.mae.resize(k);
      s.rmse.resize(k);
      for (std::size_t t = 0; t < k; ++t) {
        s.mae[t] = ratio_or_zero(abs_error_[t], n);
        s.rmse[t] = std::sqrt(ratio_or_zero(squared_error_[t], n));
      }
      s.mean_mae = std::accumulate(s.mae.begin(), s.mae.end(), 0.0) / static_cast<double>(k);
      s.mean_rmse = std::accumulate(s.rmse.begin(), s.rmse.end(), 0.0) / static_cast<double>(k);
      break;
    case Task::classify: break;
  }
  return s;
}

}  // namespace cnn
