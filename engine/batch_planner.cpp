#include "cnnengine/engine/batch_planner.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "cnnengine/base/error.hpp"
#include "cnnengine/engine/detail/micro_batch_plan.hpp"
#include "cnnengine/engine/parameter_store.hpp"

namespace cnn {

BatchPlanner::BatchPlanner(Network& network, Backend& backend, BatchPlanOptions options)
    : net_(network), backend_(backend), options_(options) {
  if (options_.batch <= 0) throw ConfigError("batch must be positive");
  if (options_.accumulate < 0 || options_.micro_batch < 0)
    throw ConfigError("micro-batch and accumulation count must not be negative");
  if (options_.accumulate > 0 && options_.micro_batch > 0)
    throw ConfigError("give a micro-batch or an accumulation count, not both");
  if (options_.rewrite_graph) net_.commute_relu_and_max_pool();
  need_ = net_.training_batch_need();
  if (need_.samples > 1) {
    const int b = options_.batch;
    smallest_ = std::min(b, 2 * need_.samples - 1);
    if (b < need_.samples) throw ConfigError("a batch of " + std::to_string(b) + ": " + need_.why);
    if (const int asked = asked_micro_batch(); asked > 0 && asked < smallest_) {
      const std::string how = options_.accumulate > 0 ? "accumulating " + std::to_string(options_.accumulate) +
                                                            " micro-batches of a batch of " + std::to_string(b) +
                                                            " gives micro-batch " + std::to_string(asked)
                                                      : "micro-batch " + std::to_string(asked);
      throw ConfigError(how + ", too small: " + need_.why + "; the smallest micro-batch is " +
                        std::to_string(smallest_) + ", so that every batch of " +
                        std::to_string(need_.samples) + " or more samples splits into micro-batches of " +
                        std::to_string(need_.samples) + " or more");
    }
  }
}

MicroBatchSplit split_into_micro_batches(int samples, int micro_batch, int need) {
  if (samples < need || micro_batch < need)
    throw ConfigError("split_into_micro_batches: " + std::to_string(samples) + " samples at micro-batch " +
                      std::to_string(micro_batch) + " with a need of " + std::to_string(need));
  MicroBatchSplit split;
  split.count = (samples + micro_batch - 1) / micro_batch;
  split.micro_batch = split.before_last = micro_batch;
  split.last = samples - (split.count - 1) * micro_batch;
  if (split.last < need) {
    const int lacking = need - split.last;
    if (split.count < 2 || micro_batch - lacking < need)
      throw ConfigError("split_into_micro_batches: micro-batch " + std::to_string(micro_batch) +
                        " is below 2 x " + std::to_string(need) + " - 1");
    split.before_last -= lacking;
    split.last = need;
  }
  return split;
}

MicroBatchPlan plan_micro_batch(const BatchPlanner& planner, int micro_batch, std::size_t workspace_limit) {
  Network& net = planner.network();
  Backend& backend = planner.backend();
  const BatchPlanOptions& options = planner.options();
  MicroBatchPlan p{plan_step(net, backend, micro_batch, true, workspace_limit),
                   plan_step(net, backend, micro_batch, false, workspace_limit), {}};
  MemoryBreakdown& m = p.breakdown;
  m.micro_batch = micro_batch;
  m.persistent = ParameterStore::planned_bytes(net, options.optimizer_slots);
  m.persistent[memory::Category::other] += options.extra_persistent;
  m.arena_peak = p.training.plan.peak_by_category;
  m.arena_bytes = std::max(p.training.arena_bytes(), p.inference.arena_bytes());
  m.lower_bound = p.training.plan.lower_bound_bytes;
  m.loader_staging = options.loader_staging;
  m.library = backend.library_reserved_bytes();
  m.budget = options.memory.budget;
  m.workspace_limit = workspace_limit;
  return p;
}

namespace {
std::size_t largest_workspace(const MicroBatchPlan& p) {
  std::size_t largest = 0;
  for (const StepPlan* plan : {&p.training, &p.inference})
    for (const memory::BufferRequest& r : plan->requests)
      if (r.category == memory::Category::workspace) largest = std::max(largest, r.bytes);
  return largest;
}
}  // namespace

MicroBatchPlan plan_micro_batch(const BatchPlanner& planner, int micro_batch) {
  const BatchPlanOptions& options = planner.options();
  if (options.memory.budget == 0) return plan_micro_batch(planner, micro_batch, options.workspace_limit);
  // No layer's workspace can be more than the whole budget; this also bounds the scratch that
  // cuDNN's algorithm measurement takes while planning.
  MicroBatchPlan p = plan_micro_batch(planner, micro_batch, std::min(options.workspace_limit, options.memory.budget));
  // Each round asks the largest workspace to give up what the plan is over the budget. The
  // arena need not shrink by as much (that workspace may not be live at the peak), hence rounds.
  for (int round = 0; round < 8 && !p.breakdown.fits(); ++round) {
    const std::size_t largest = largest_workspace(p);
    if (largest == 0) break;
    const std::size_t over = p.breakdown.total() - p.breakdown.budget;
    const std::size_t lower = largest > over ? largest - over : 0;
    MicroBatchPlan smaller = plan_micro_batch(planner, micro_batch, lower);
    if (smaller.breakdown.total() >= p.breakdown.total()) break;  // nothing leaner (the CPU: im2col)
    p = std::move(smaller);
  }
  return p;
}

std::size_t BatchPlanner::workspace_limit(int micro_batch) const { return breakdown(micro_batch).workspace_limit; }

MemoryBreakdown BatchPlanner::breakdown(int micro_batch) const {
  auto known = breakdowns_.find(micro_batch);
  if (known == breakdowns_.end()) known = breakdowns_.emplace(micro_batch, plan_micro_batch(*this, micro_batch).breakdown).first;
  return known->second;
}

int BatchPlanner::largest_fitting(int limit) const {
  if (options_.memory.budget == 0) return limit;
  if (limit < smallest_ || !breakdown(smallest_).fits()) return 0;
  int lo = smallest_, hi = limit;  // the plan grows with the micro-batch: bisect
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    if (breakdown(mid).fits()) lo = mid;
    else hi = mid - 1;
  }
  // It grows only nearly monotonically: the greedy planner's arena may dip by a few KiB from
  // one micro-batch to the next. Look a little above for one that fits after all (the window
  // moves up with each one found).
  constexpr int kLookAbove = 8;
  for (int b = lo + 1; b <= limit && b <= lo + kLookAbove; ++b)
    if (breakdown(b).fits()) lo = b;
  return lo;
}

int BatchPlanner::asked_micro_batch() const {
  if (options_.accumulate > 0) return (options_.batch + options_.accumulate - 1) / options_.accumulate;
  return std::min(options_.micro_batch, options_.batch);
}

int BatchPlanner::choose() const {
  const int b = asked_micro_batch();
  if (b == 0) return largest_fitting(options_.batch);
  return breakdown(b).fits() ? b : 0;
}

}  // namespace cnn
