#pragma once
// One evaluation over a stream of batches, the same for a trainer and a predictor: each batch
// checked once, the loss sums its forward passes leave on the device added up, its outputs
// counted into the task's scores (a classification's confusion matrix where asked), the result
// summed over a data-parallel run's ranks. The owner only runs a batch's passes.
#include <array>
#include <cstddef>
#include <functional>
#include <vector>

#include <cnnengine/base/batch.hpp>
#include <cnnengine/engine/core/network.hpp>
#include <cnnengine/engine/core/task_metrics.hpp>

namespace cnn {

// What one batch's forward passes counted: its outputs, a run of samples at a time, into the
// task's scores and the confusion matrix. A batch replayed after an out-of-memory failure
// restarts, so that it counts once.
class BatchCounts {
 public:
  BatchCounts(const Network& net, bool confusion);
  // Whether the passes must bring their outputs to the host (add_outputs).
  bool wants_outputs() const { return confusion_ || scored_; }
  // Forgets what the batch in progress counted.
  void restart();
  // The host outputs of the batch's samples first .. first + n - 1 (n x the output's elements).
  void add_outputs(const Batch& batch, int first, int n, const float* outputs);
  // Adds what the batch counted to the evaluation's totals (`confusion`: classes x classes, or
  // empty without one).
  void add_to(TaskMetrics& metrics, std::vector<std::vector<std::size_t>>& confusion) const;

 private:
  const Network& net_;
  bool confusion_, scored_;
  int height_, width_;
  TaskMetrics metrics_;
  std::vector<std::vector<std::size_t>> predictions_;  // [true][predicted], the batch's
};

// The loss sums a batch's passes left on the device ({loss, correct, counted}, as the loss adds
// them in float), read back after the batch.
using BatchSums = std::array<float, 3>;

// Runs `batch`'s forward passes: the device's loss sums zeroed first, the outputs handed to
// `counts` where it wants them; returns the sums.
using EvaluationPasses = std::function<BatchSums(const Batch& batch, BatchCounts& counts)>;
// Adds a vector of counts over a data-parallel run's ranks, in place.
using SumOverRanks = std::function<void(std::vector<double>& totals)>;

// Every batch `next` gives: empty ones skipped, one in device memory refused, the others checked
// (check_batch_inputs, check_batch_targets) and run. With `confusion`, a classification's matrix
// (empty for the other tasks, which have their scores).
ClassEvaluation evaluate_batches(const Network& net, const NextBatch& next, bool confusion,
                                 const EvaluationPasses& passes, const SumOverRanks& sum_over_ranks = {});

}  // namespace cnn
