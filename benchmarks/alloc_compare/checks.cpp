#include "checks.hpp"

#include <cstdio>

#include <cnnengine/memory/memory_resource.hpp>

namespace alloc_compare {

namespace {

using cnn::memory::format_bytes;

std::string fixed(double value, int digits = 3) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

Check make(std::string name, bool ok, std::string detail, bool goal = false) {
  const Verdict v = goal ? (ok ? Verdict::goal_met : Verdict::goal_missed) : (ok ? Verdict::pass : Verdict::fail);
  return {std::move(name), v, std::move(detail)};
}

Check skip(std::string name, std::string why) { return {std::move(name), Verdict::skip, std::move(why)}; }

// Planned makes no upstream call once its arena is reserved.
void zero_upstream_calls(const Comparison& c, std::vector<Check>& out) {
  for (const Row& row : c.rows) {
    if (row.run.strategy != cnn::memory::Strategy::planned) continue;
    const Summary s = summarize(row.run);
    const std::string name = "planned makes zero upstream calls per step (" + row.run.workload + ")";
    if (s.steps == 0) {
      out.push_back(skip(name, "no steps ran"));
      continue;
    }
    out.push_back(make(name,
                       s.completed && s.upstream_calls_in_steps == 0,
                       std::to_string(s.upstream_calls_in_steps) + " upstream calls in " + std::to_string(s.steps) + " steps"));
  }
}

void flat_reserved(const Comparison& c, std::vector<Check>& out) {
  const std::string name = "planned reserved bytes exactly flat over the extended churn";
  const Row* row = c.find("extended", cnn::memory::Strategy::planned);
  if (!row) return out.push_back(skip(name, "the extended workload did not run"));
  const Summary s = summarize(row->run);
  const bool flat = s.completed && s.steps > 0 && s.reserved_min == s.reserved_max && s.reserved_max == row->run.setup_reserved;
  out.push_back(make(name, flat,
                     std::to_string(s.steps) + " steps, reserved " + std::to_string(s.reserved_min) + " to " +
                         std::to_string(s.reserved_max) + " bytes, " + std::to_string(row->run.setup_reserved) +
                         " before step 1"));
}

// The churn workload reserves what the Trainer itself reserves before step 1: its persistent
// blocks and arena are the Trainer's, not a model of them.
void same_setup_as_trainer(const Comparison& c, std::vector<Check>& out) {
  const Row* steady = c.find("steady", cnn::memory::Strategy::planned);
  const Row* churn = c.find("churn", cnn::memory::Strategy::planned);
  if (!churn) churn = c.find("extended", cnn::memory::Strategy::planned);
  if (!steady || !churn) return;
  out.push_back(make("churn's planned setup reserves what the Trainer reserves",
                     steady->run.setup_reserved == churn->run.setup_reserved,
                     "Trainer " + std::to_string(steady->run.setup_reserved) + " bytes, churn " +
                         std::to_string(churn->run.setup_reserved) + " bytes"));
}

void within_budget(const Comparison& c, std::vector<Check>& out) {
  if (!c.budget) return;
  for (const Row& row : c.rows) {
    if (!row.under_budget) continue;
    const RunResult& r = *row.under_budget;
    out.push_back(make("reserved stays within the budget (" + r.workload + ", " + cnn::memory::to_string(r.strategy) + ")",
                       r.peak_reserved <= c.budget,
                       "peak " + format_bytes(r.peak_reserved) + " of " + format_bytes(c.budget) +
                           (r.setup_failed ? " (the run did not fit: refused before step 1)" : "")));
  }
}

// The planner's answer holds when the planned strategy runs for real: its largest batch runs
// under the budget without a refusal, and one sample more does not fit.
void planned_batch_confirmed(const Comparison& c, std::vector<Check>& out) {
  for (const Row& row : c.rows) {
    if (row.run.strategy != cnn::memory::Strategy::planned || !row.confirmed) continue;
    out.push_back(make("planned's largest batch (planner) fits when run, one more does not (" + row.run.workload + ")",
                       row.confirmed->fits && row.confirmed->next_refused,
                       "batch " + std::to_string(row.largest_batch) + (row.confirmed->fits ? " runs" : " FAILS") +
                           ", batch " + std::to_string(row.largest_batch + 1) +
                           (row.confirmed->next_refused ? " is refused" : " also fits")));
  }
}

void goals(const Comparison& c, std::vector<Check>& out) {
  for (const char* workload : {"churn", "extended"}) {
    const Row* planned = c.find(workload, cnn::memory::Strategy::planned);
    const Row* pool = c.find(workload, cnn::memory::Strategy::pool);
    if (!planned || !pool) continue;
    const double ratio = static_cast<double>(planned->run.peak_reserved) / static_cast<double>(pool->run.peak_reserved);
    out.push_back(make(std::string("planned reserves at most 0.7 x pool under ") + workload, ratio <= 0.7,
                       "planned " + format_bytes(planned->run.peak_reserved) + " / pool " +
                           format_bytes(pool->run.peak_reserved) + " = " + fixed(ratio),
                       true));
    if (planned->largest_batch >= 0 && pool->largest_batch >= 0)
      out.push_back(make(std::string("planned fits a larger batch than pool in the budget (") + workload + ")",
                         planned->largest_batch > pool->largest_batch,
                         "planned " + std::to_string(planned->largest_batch) + ", pool " +
                             std::to_string(pool->largest_batch) + " (ratio " +
                             (pool->largest_batch ? fixed(static_cast<double>(planned->largest_batch) / pool->largest_batch) : std::string("-")) +
                             ") in " + format_bytes(c.budget),
                         true));
  }
}

}  // namespace

std::vector<Check> evaluate(const Comparison& c) {
  std::vector<Check> checks;
  zero_upstream_calls(c, checks);
  flat_reserved(c, checks);
  same_setup_as_trainer(c, checks);
  within_budget(c, checks);
  planned_batch_confirmed(c, checks);
  goals(c, checks);
  return checks;
}

bool any_failed(const std::vector<Check>& checks) {
  for (const Check& check : checks)
    if (check.verdict == Verdict::fail) return true;
  return false;
}

std::string verdict_word(Verdict v) {
  switch (v) {
    case Verdict::pass: return "PASS";
    case Verdict::fail: return "FAIL";
    case Verdict::skip: return "SKIP";
    case Verdict::goal_met: return "GOAL MET";
    case Verdict::goal_missed: return "GOAL MISSED";
  }
  return "?";
}

std::string format_checks(const std::vector<Check>& checks) {
  std::string text;
  for (const Check& check : checks) text += verdict_word(check.verdict) + ": " + check.name + ": " + check.detail + "\n";
  return text;
}

}  // namespace alloc_compare
