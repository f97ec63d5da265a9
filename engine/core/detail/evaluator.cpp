#include "engine/core/detail/evaluator.hpp"

#include <algorithm>
#include <cstddef>
#include <string>

#include <cnnengine/base/error.hpp>
#include "engine/core/detail/batch_checks.hpp"
#include "engine/core/detail/loss_call.hpp"

namespace cnn {

BatchCounts::BatchCounts(const Network& net, bool confusion)
    : net_(net), confusion_(confusion && net.task() == Task::classify), scored_(net.task() != Task::classify),
      height_(net.task() == Task::segment ? net.input_shape()[1] : 1),
      width_(net.task() == Task::segment ? net.input_shape()[2] : 1),
      metrics_(net.loss().task, net.num_classes(), net.loss().threshold) {
  restart();
}

void BatchCounts::restart() {
  if (scored_) metrics_ = TaskMetrics(net_.loss().task, net_.num_classes(), net_.loss().threshold);
  if (!confusion_) return;
  const auto classes = static_cast<std::size_t>(net_.num_classes());
  if (predictions_.size() != classes) predictions_.assign(classes, std::vector<std::size_t>(classes, 0));
  for (auto& row : predictions_) std::fill(row.begin(), row.end(), 0);
}

void BatchCounts::add_outputs(const Batch& batch, int first, int n, const float* outputs) {
  if (confusion_) count_predictions(predictions_, outputs, batch.labels + first, n);
  if (!scored_) return;
  const std::size_t per_sample = net_.output_shape().elements();
  const std::size_t target_bytes = net_.target_bytes();
  const auto* targets = static_cast<const char*>(batch.targets);
  for (int i = 0; i < n; ++i)
    metrics_.add(outputs + static_cast<std::size_t>(i) * per_sample,
                 targets + static_cast<std::size_t>(first + i) * target_bytes, height_, width_);
}

void BatchCounts::add_to(TaskMetrics& metrics, std::vector<std::vector<std::size_t>>& confusion) const {
  if (scored_) metrics.merge(metrics_);
  if (!confusion_) return;
  for (std::size_t t = 0; t < confusion.size(); ++t)
    for (std::size_t p = 0; p < confusion[t].size(); ++p) confusion[t][p] += predictions_[t][p];
}

ClassEvaluation evaluate_batches(const Network& net, const NextBatch& next, bool confusion,
                                 const EvaluationPasses& passes, const SumOverRanks& sum_over_ranks) {
  if (!next) throw ConfigError("evaluate: no source of batches (an empty NextBatch)");
  const LossOptions& loss = net.loss();
  ClassEvaluation result;
  TaskMetrics metrics(loss.task, net.num_classes(), loss.threshold);
  BatchCounts counts(net, confusion);
  if (confusion && net.task() == Task::classify) {
    const auto classes = static_cast<std::size_t>(net.num_classes());
    result.confusion.assign(classes, std::vector<std::size_t>(classes, 0));
  }
  // Each batch's sums are read back on their own, in float, then added up in double.
  double loss_sum = 0, correct = 0, counted = 0;
  while (auto batch = next()) {
    if (batch->size <= 0) continue;
    if (batch->on_device) throw ConfigError("evaluate: a batch in device memory (Batch::on_device) trains only");
    check_batch_inputs(*batch, net.input_shape(), "evaluate");
    check_batch_targets(*batch, net);
    counts.restart();
    const BatchSums sums = passes(*batch, counts);
    loss_sum += sums[0];
    correct += sums[1];
    counted += sums[2];
    result.samples += static_cast<std::size_t>(batch->size);
    counts.add_to(metrics, result.confusion);
  }
  if (sum_over_ranks) {
    // Each rank evaluated its share of the batches: the result is every rank's.
    std::vector<double> totals = {loss_sum, correct, counted, static_cast<double>(result.samples)};
    for (const auto& row : result.confusion) totals.insert(totals.end(), row.begin(), row.end());
    const std::vector<double> metric_sums = metrics.sums();
    totals.insert(totals.end(), metric_sums.begin(), metric_sums.end());
    sum_over_ranks(totals);
    loss_sum = totals[0];
    correct = totals[1];
    counted = totals[2];
    result.samples = static_cast<std::size_t>(totals[3]);
    std::size_t k = 4;
    for (auto& row : result.confusion)
      for (std::size_t& n : row) n = static_cast<std::size_t>(totals[k++]);
    metrics.set_sums(std::vector<double>(totals.begin() + static_cast<std::ptrdiff_t>(k), totals.end()));
  }
  if (result.samples) {
    result.loss = loss_sum / static_cast<double>(result.samples);
    const double over = counted_over(loss.task, counted, result.samples);
    result.accuracy = loss.task == Task::regress || over == 0 ? 0.0 : correct / over;
  }
  result.scores = metrics.scores();
  return result;
}

}  // namespace cnn
