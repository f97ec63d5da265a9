#pragma once
// An evaluation's task scores (TaskScores) as a program shows them: the headline figures by name,
// for a line of text, a JSON line or a watched metric, and the table of a class's scores.
#include <string>
#include <utility>
#include <vector>

#include <cnnengine/engine/core/task_metrics.hpp>

namespace cnn {

// The task's headline figures, by name: pixel_accuracy and mean_iou (segment); mean_f1 and
// mean_average_precision (multilabel); mae and rmse, the means over the targets (regress); none
// for a classification (its accuracy is EvalResult's).
std::vector<std::pair<std::string, double>> headline_scores(const TaskScores& scores);

// Whether a lower value of the named headline figure is better (mae, rmse).
bool lower_score_is_better(const std::string& name);

// "pixel accuracy 0.9312, mean IoU 0.7120": the headline figures in words; empty for a
// classification.
std::string describe_scores(const TaskScores& scores);

// One line a class (or target) of the scores, under a header line: its name (`names`, or its
// number) and its figures (IoU; precision, recall, F1, average precision; MAE, RMSE).
std::vector<std::string> score_table(const TaskScores& scores, const std::vector<std::string>& names);

}  // namespace cnn
