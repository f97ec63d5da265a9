#include "option_suggestion.hpp"

#include <algorithm>
#include <climits>

namespace cnn::app {
namespace {

// The optimal string alignment distance: edits that insert, delete or change one character, or
// swap two neighbours.
int edits_between(const std::string& a, const std::string& b) {
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = static_cast<int>(i);
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = static_cast<int>(j);
  for (std::size_t i = 1; i <= n; ++i)
    for (std::size_t j = 1; j <= m; ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[n][m];
}

}  // namespace

std::string nearest_option(const std::string& given, const std::vector<std::string>& options) {
  const std::string name = given.substr(0, given.find('='));
  if (name.size() < 3 || name.size() > 64) return {};
  constexpr int kMostEdits = 2;
  int best = INT_MAX;
  std::vector<std::string> closest, extending;
  for (const std::string& option : options) {
    if (option.rfind(name, 0) == 0) extending.push_back(option);
    const int edits = edits_between(name, option);
    if (edits < best) {
      best = edits;
      closest = {option};
    } else if (edits == best) {
      closest.push_back(option);
    }
  }
  if (best <= kMostEdits && closest.size() == 1) return closest.front();
  if (extending.size() == 1) return extending.front();
  return {};
}

}  // namespace cnn::app
