#pragma once
// What an evaluation gives: the mean loss and accuracy, and with the confusion matrix each
// class's precision, recall and accuracy. A trainer and a predictor both evaluate.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace cnn {

struct EvalResult {
  double loss = 0, accuracy = 0;
  std::size_t samples = 0;
};

// An evaluation with the confusion matrix: for each class, its precision (of the samples
// predicted as it, those that are), recall (of its samples, those predicted as it) and accuracy
// (of all samples, those it gets right as one against the rest).
struct ClassEvaluation : EvalResult {
  std::vector<std::vector<std::size_t>> confusion;  // [true class][predicted class]
  double precision(int c) const;
  double recall(int c) const;
  double class_accuracy(int c) const;
};

// Counts `samples` predictions into `confusion` (classes x classes): each row of `logits`
// (`classes` floats) predicts its largest, the first of equal ones, against its label.
void count_predictions(std::vector<std::vector<std::size_t>>& confusion, const float* logits,
                       const std::int32_t* labels, int samples);

}  // namespace cnn
