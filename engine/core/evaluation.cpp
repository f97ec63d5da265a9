#include <cnnengine/engine/core/network.hpp>

#include <algorithm>
#include <cstdint>
#include <string>

#include <cnnengine/base/error.hpp>

namespace cnn {
namespace {

void check_class(const ClassEvaluation& e, int c) {
  if (c < 0 || static_cast<std::size_t>(c) >= e.confusion.size())
    throw ConfigError("class " + std::to_string(c) + " of an evaluation of " + std::to_string(e.confusion.size()) +
                      " classes");
}

}  // namespace

void count_predictions(std::vector<std::vector<std::size_t>>& confusion, const float* logits,
                       const std::int32_t* labels, int samples) {
  const std::size_t classes = confusion.size();
  for (int i = 0; i < samples; ++i) {
    const float* row = logits + static_cast<std::size_t>(i) * classes;
    const auto predicted = static_cast<std::size_t>(std::max_element(row, row + classes) - row);
    ++confusion[static_cast<std::size_t>(labels[i])][predicted];
  }
}

double ClassEvaluation::precision(int c) const {
  check_class(*this, c);
  std::size_t predicted = 0;
  for (const auto& row : confusion) predicted += row[static_cast<std::size_t>(c)];
  const std::size_t right = confusion[static_cast<std::size_t>(c)][static_cast<std::size_t>(c)];
  return predicted ? static_cast<double>(right) / static_cast<double>(predicted) : 0.0;
}

double ClassEvaluation::recall(int c) const {
  check_class(*this, c);
  const auto& row = confusion[static_cast<std::size_t>(c)];
  std::size_t actual = 0;
  for (std::size_t n : row) actual += n;
  return actual ? static_cast<double>(row[static_cast<std::size_t>(c)]) / static_cast<double>(actual) : 0.0;
}

double ClassEvaluation::class_accuracy(int c) const {
  check_class(*this, c);
  // One against the rest: right are the samples of c predicted as c and the others predicted as not c.
  std::size_t total = 0, wrong = 0;
  const auto k = static_cast<std::size_t>(c);
  for (std::size_t t = 0; t < confusion.size(); ++t)
    for (std::size_t p = 0; p < confusion[t].size(); ++p) {
      total += confusion[t][p];
      if ((t == k) != (p == k)) wrong += confusion[t][p];
    }
  return total ? static_cast<double>(total - wrong) / static_cast<double>(total) : 0.0;
}

}  // namespace cnn
