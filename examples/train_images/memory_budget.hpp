#pragma once
// The memory budget a command holds: --memory-budget, or, where none was given, a share of what
// the device has available now, so that no network (a hostile checkpoint's included) can plan
// more than the machine has. Printed when it was not given.
#include <cstddef>

#include <cnnengine/cnnengine.hpp>
#include "options.hpp"

namespace cnn::app {

// The share of the available memory a run without --memory-budget takes: the rest is left to the
// process's own host memory outside the budget (the data set, the libraries) and to others.
inline constexpr double kDefaultBudgetShare = 0.9;

// `sharing`: the processes on this machine that take their budgets from the same memory (the
// ranks on one host, for the CPU). 0 when nothing is known of the device and no budget was given.
std::size_t memory_budget_of(const Options& o, const Backend& backend, int sharing, bool print);

}  // namespace cnn::app
