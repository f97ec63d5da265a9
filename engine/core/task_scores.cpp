#include <cnnengine/engine/core/task_scores.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace cnn {
namespace {

std::string figure(double value) {
  if (std::isnan(value)) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.4f", value);
  return text;
}

std::string name_of(const std::vector<std::string>& names, std::size_t i) {
  return i < names.size() ? names[i] : std::to_string(i);
}

double at(const std::vector<double>& values, std::size_t i) { return i < values.size() ? values[i] : NAN; }

}  // namespace

std::vector<std::pair<std::string, double>> headline_scores(const TaskScores& s) {
  switch (s.task) {
    case Task::classify: return {};
    case Task::segment: return {{"pixel_accuracy", s.pixel_accuracy}, {"mean_iou", s.mean_iou}};
    case Task::multilabel: return {{"mean_f1", s.mean_f1}, {"mean_average_precision", s.mean_average_precision}};
    case Task::regress: return {{"mae", s.mean_mae}, {"rmse", s.mean_rmse}};
  }
  return {};
}

bool lower_score_is_better(const std::string& name) { return name == "mae" || name == "rmse"; }

std::string describe_scores(const TaskScores& s) {
  switch (s.task) {
    case Task::classify: return {};
    case Task::segment: return "pixel accuracy " + figure(s.pixel_accuracy) + ", mean IoU " + figure(s.mean_iou);
    case Task::multilabel:
      return "mean F1 " + figure(s.mean_f1) + ", mAP " + figure(s.mean_average_precision);
    case Task::regress: return "MAE " + figure(s.mean_mae) + ", RMSE " + figure(s.mean_rmse);
  }
  return {};
}

std::vector<std::string> score_table(const TaskScores& s, const std::vector<std::string>& names) {
  std::size_t count = 0;
  std::vector<std::string> headers;
  std::vector<const std::vector<double>*> columns;
  switch (s.task) {
    case Task::classify: return {};
    case Task::segment:
      headers = {"IoU"};
      columns = {&s.iou};
      count = s.iou.size();
      break;
    case Task::multilabel:
      headers = {"precision", "recall", "F1", "AP"};
      columns = {&s.precision, &s.recall, &s.f1, &s.average_precision};
      count = s.f1.size();
      break;
    case Task::regress:
      headers = {"MAE", "RMSE"};
      columns = {&s.mae, &s.rmse};
      count = s.mae.size();
      break;
  }
  int width = 5;
  for (std::size_t i = 0; i < count; ++i) width = std::max(width, static_cast<int>(name_of(names, i).size()));
  std::vector<std::string> lines;
  char text[64];
  std::string header;
  std::snprintf(text, sizeof text, "  %-*s", width, s.task == Task::regress ? "target" : "class");
  header = text;
  for (const std::string& h : headers) {
    std::snprintf(text, sizeof text, " %9s", h.c_str());
    header += text;
  }
  lines.push_back(header);
  for (std::size_t i = 0; i < count; ++i) {
    std::snprintf(text, sizeof text, "  %-*s", width, name_of(names, i).c_str());
    std::string line = text;
    for (const auto* column : columns) {
      std::snprintf(text, sizeof text, " %9s", figure(at(*column, i)).c_str());
      line += text;
    }
    lines.push_back(line);
  }
  return lines;
}

}  // namespace cnn
