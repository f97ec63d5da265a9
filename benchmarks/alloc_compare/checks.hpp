#pragma once
// What must hold (PASS or FAIL: a FAIL makes the program exit nonzero) and where planned stands
// against the goals (met or missed: reported, never an error).
#include <string>
#include <vector>

#include "comparison.hpp"

namespace alloc_compare {

enum class Verdict { pass, fail, skip, goal_met, goal_missed };

struct Check {
  std::string name;
  Verdict verdict = Verdict::skip;
  std::string detail;
};

std::vector<Check> evaluate(const Comparison& comparison);
bool any_failed(const std::vector<Check>& checks);
std::string verdict_word(Verdict verdict);  // PASS, FAIL, SKIP, GOAL MET, GOAL MISSED
std::string format_checks(const std::vector<Check>& checks);

}  // namespace alloc_compare
