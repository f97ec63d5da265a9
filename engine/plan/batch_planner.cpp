#include "engine/plan/batch_planner.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include <cnnengine/base/error.hpp>
#include "engine/core/detail/input_stager.hpp"
#include <cnnengine/engine/core/parameter_store.hpp>
#include "engine/plan/detail/cost_model.hpp"
#include "engine/plan/detail/largest_fitting.hpp"
#include "engine/plan/detail/micro_batch_plan.hpp"
#include "engine/plan/detail/query_memory.hpp"
#include "engine/plan/detail/recompute_search.hpp"
#include "engine/plan/detail/workspace_fitting.hpp"
#include "memory/detail/strategy_replay.hpp"

namespace cnn {

BatchPlanner::BatchPlanner(Network& network, Backend& backend, BatchPlanOptions options,
                           memory::MemoryResource* query_memory)
    : net_(network), backend_(backend), options_(options), query_memory_(query_memory) {
  if (options_.batch <= 0) throw ConfigError("batch must be positive");
  // Far above any batch that trains, and low enough that sums of sample counts stay in an int.
  constexpr int kLargestBatch = 1 << 24;
  if (options_.batch > kLargestBatch)
    throw ConfigError("a batch of " + std::to_string(options_.batch) + " samples: at most " +
                      std::to_string(kLargestBatch) + " are taken");
  // Byte counts added up with the plan's: none may come near overflowing the sum (the account's
  // own are checked as they are entered).
  constexpr std::size_t kLargestBytes = std::size_t{1} << 60;
  if (options_.extra_persistent > kLargestBytes)
    throw ConfigError("extra persistent bytes of " + std::to_string(options_.extra_persistent) +
                      ": more than any memory holds");
  if (options_.accumulate < 0 || options_.micro_batch < 0)
    throw ConfigError("micro-batch and accumulation count must not be negative");
  if (options_.accumulate > 0 && options_.micro_batch > 0)
    throw ConfigError("give a micro-batch or an accumulation count, not both");
  if (options_.rewrite_graph) net_.commute_relu_and_max_pool();
  most_ = largest_describable_micro_batch(net_, backend_, kLargestBatch);
  if (most_ == 0 || (asked_micro_batch() > most_))
    throw ConfigError((most_ == 0 ? std::string("one sample") : "micro-batch " + std::to_string(asked_micro_batch())) +
                      ": a tensor of it would hold more values than the " + to_string(backend_.kind()) +
                      " backend takes in one (" + std::to_string(backend_.largest_tensor_elements()) +
                      "); at most " + std::to_string(most_) + " samples a micro-batch");
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

std::size_t BatchPlanner::bytes_outside_arena(const MemoryBreakdown& m) const {
  const std::size_t staging_at_batch =
      InputStager::bytes_for(backend_, net_.input_shape().elements(), net_.target_bytes(), options_.batch);
  return m.persistent.total() + std::max(m.input_staging, staging_at_batch);
}

namespace {

// A dynamic strategy serves the step's buffers one at a time, in its own size classes and chunks:
// the plan fits only if the strategy, run on the plan's buffers in what the budget leaves it,
// serves every one (a training step, another, an evaluation step, a training step again).
void check_strategy(const BatchPlanner& planner, MicroBatchPlan& p) {
  const BatchPlanOptions& options = planner.options();
  const memory::BudgetAccount& account = options.account;
  MemoryBreakdown& m = p.breakdown;
  const memory::Strategy strategy = options.strategy;
  if (strategy == memory::Strategy::planned || !account.limited()) return;
  std::size_t limit = account.left_for_step_buffers(m.persistent.total() + m.input_staging);
  if (limit == 0) return;  // over the budget already
  std::size_t capacity = 0;
  if (strategy == memory::Strategy::arena) {
    // What the trainer's memory stack reserves for the arena (MemoryStack::build_step_buffers).
    capacity = account.arena_capacity(planner.bytes_outside_arena(m));
    limit = capacity;
  }
  if (limit == 0) {
    m.strategy_serves = false;
    m.strategy_refusal = "nothing is left for the " + memory::to_string(strategy) + " strategy";
    return;
  }
  const std::vector<memory::BufferRequest>& training = p.training.requests;
  const memory::StrategyReplay replay =
      memory::replay_step_buffers(strategy, limit, capacity, {&training, &training, &p.inference.requests, &training});
  m.strategy_serves = replay.served;
  m.strategy_refusal = replay.refusal;
  if (strategy == memory::Strategy::pool) m.arena_bytes = std::max(m.arena_bytes, replay.peak_bytes);
}

}  // namespace

MicroBatchPlan plan_micro_batch(const BatchPlanner& planner, int micro_batch, std::size_t workspace_limit,
                                RecomputePolicy policy, std::optional<std::size_t> arena_cap) {
  Network& net = planner.network();
  Backend& backend = planner.backend();
  const BatchPlanOptions& options = planner.options();
  const QueryMemoryScope scratch(backend, planner.query_memory());
  StepNeeds training = step_needs(net, backend, micro_batch, true, workspace_limit);
  StepNeeds inference = step_needs(net, backend, micro_batch, false, workspace_limit);
  training.values = inference.values = chosen_value_format(net, training, options.values, options.narrow_values);
  MicroBatchPlan p;
  MemoryBreakdown& m = p.breakdown;
  m.micro_batch = micro_batch;
  m.persistent =
      ParameterStore::planned_bytes(net, options.optimizer_slots, ParameterStore::state_copies_for(backend));
  m.persistent[memory::Category::other] += options.extra_persistent;
  const memory::BudgetAccount& account = options.account;
  m.loader_staging = account.loader_staging();
  m.input_staging = InputStager::bytes_for(backend, net.input_shape().elements(), net.target_bytes(), micro_batch);
  m.library = account.libraries();
  m.communication = account.communication();
  m.budget = account.budget();
  m.workspace_limit = workspace_limit;

  const CostModel cost(net, backend.compute_rates());
  switch (policy) {
    case RecomputePolicy::none: p.training = plan_step(net, training); break;
    case RecomputePolicy::cheap: p.training = plan_step(net, training, cheap_recompute_set(net, training, cost)); break;
    case RecomputePolicy::automatic: {
      if (!arena_cap && account.limited())
        arena_cap = account.left_for_step_buffers(m.persistent.total() + m.input_staging);
      p.training = arena_cap ? least_recompute_within(net, training, cost, *arena_cap).plan : plan_step(net, training);
      break;
    }
  }
  p.inference = plan_step(net, inference);

  m.arena_peak = p.training.plan.peak_by_category;
  m.arena_bytes = std::max(p.training.arena_bytes(), p.inference.arena_bytes());
  m.lower_bound = p.training.plan.lower_bound_bytes;
  m.recompute = policy;
  std::vector<int> layers = p.training.recomputed;
  std::sort(layers.begin(), layers.end());
  m.recomputed_layers = static_cast<int>(std::unique(layers.begin(), layers.end()) - layers.begin());
  m.recompute_fraction = cost.extra_fraction(p.training.recomputed, micro_batch);
  m.in_place_layers = static_cast<int>(p.training.in_place.size());
  m.fused_relus = static_cast<int>(
      std::count_if(p.training.fused_relu.begin(), p.training.fused_relu.end(), [](int r) { return r != 0; }));
  m.fused_conv_relus = static_cast<int>(std::count_if(p.training.relu_in_forward.begin(),
                                                      p.training.relu_in_forward.end(), [](int r) { return r != 0; }));
  m.fused_adds = static_cast<int>(
      std::count_if(p.training.fused_add.begin(), p.training.fused_add.end(), [](int a) { return a != 0; }));
  m.values = training.values;
  check_strategy(planner, p);
  if (micro_batch >= planner.smallest_micro_batch())
    m.expected_samples_per_second = cost.throughput(options.batch, micro_batch, planner.training_batch_need().samples,
                                                    p.training.recomputed);
  return p;
}

namespace {

// The plans at micro-batch b with the largest per-layer workspace limit that fits the budget.
MicroBatchPlan plan_within_budget(const BatchPlanner& planner, int micro_batch, RecomputePolicy policy) {
  const BatchPlanOptions& options = planner.options();
  return plan_within_workspace_budget<MicroBatchPlan>(
      options.workspace_limit, options.account.budget(),
      [&](std::size_t limit) { return plan_micro_batch(planner, micro_batch, limit, policy); });
}

}  // namespace

MicroBatchPlan plan_micro_batch(const BatchPlanner& planner, int micro_batch) {
  return plan_within_budget(planner, micro_batch, planner.options().recompute);
}

std::size_t BatchPlanner::workspace_limit(int micro_batch) const {
  return workspace_limit(micro_batch, options_.recompute);
}

std::size_t BatchPlanner::workspace_limit(int micro_batch, RecomputePolicy policy) const {
  return breakdown(micro_batch, policy).workspace_limit;
}

MemoryBreakdown BatchPlanner::breakdown(int micro_batch) const { return breakdown(micro_batch, options_.recompute); }

MemoryBreakdown BatchPlanner::breakdown(int micro_batch, RecomputePolicy policy) const {
  const auto key = std::make_pair(micro_batch, policy);
  auto known = breakdowns_.find(key);
  if (known == breakdowns_.end())
    known = breakdowns_.emplace(key, plan_within_budget(*this, micro_batch, policy).breakdown).first;
  return known->second;
}

int BatchPlanner::largest_fitting(int limit) const { return largest_fitting(limit, options_.recompute); }

int BatchPlanner::largest_fitting(int limit, RecomputePolicy policy) const {
  limit = std::min(limit, most_);
  if (!options_.account.limited()) return limit;
  return largest_fitting_micro_batch(smallest_, limit, [&](int b) { return breakdown(b, policy).fits(); });
}

std::vector<MemoryBreakdown> BatchPlanner::weighed_micro_batches() const {
  if (options_.recompute != RecomputePolicy::automatic || !options_.account.limited()) return {};
  const int batch = options_.batch;
  const int plain = largest_fitting(batch, RecomputePolicy::none);
  const int most = plain == batch ? batch : largest_fitting(batch, RecomputePolicy::automatic);
  if (most == 0) return {};
  // Only the number of micro-batches per step changes the expected time at a given amount of
  // recomputation: for each count from the one without recomputation down to the fewest, the
  // smallest micro-batch that gives it (it recomputes least). Counts thinned out geometrically.
  auto count = [&](int b) { return (batch + b - 1) / b; };
  std::vector<int> sizes;
  if (plain > 0) sizes.push_back(plain);
  const int fewest = count(most);
  constexpr int kMostWeighed = 10;
  for (int k = plain > 0 ? count(plain) - 1 : count(smallest_); k >= fewest;) {
    const int b = std::max((batch + k - 1) / k, smallest_);
    if (b > plain && b <= most && (sizes.empty() || b > sizes.back())) sizes.push_back(b);
    if (k == fewest) break;
    k = std::max(fewest, std::min(k - 1, k * (kMostWeighed - 1) / kMostWeighed));
  }
  std::vector<MemoryBreakdown> weighed;
  for (int b : sizes) weighed.push_back(breakdown(b, RecomputePolicy::automatic));
  return weighed;
}

int BatchPlanner::asked_micro_batch() const {
  if (options_.accumulate > 0) return (options_.batch + options_.accumulate - 1) / options_.accumulate;
  return std::min(options_.micro_batch, options_.batch);
}

// Note [Even micro-batches]
// The largest micro-batch that fits may split the batch unevenly: 256 at 17 is 15 micro-batches
// of 17 and a last one of 1. The same 16 passes at ceil(256 / 16) = 16 do the same work in as
// many launches, need less memory, and give every micro-batch alike BatchNorm statistics. So of
// the micro-batches that take as few passes as the largest, the smallest is chosen (at least the
// network's smallest micro-batch). A micro-batch the user asked for is kept as asked.
namespace {

int evened_micro_batch(int batch, int largest, int smallest) {
  if (largest <= 0 || batch <= 0) return largest;
  const int passes = (batch + largest - 1) / largest;
  const int even = (batch + passes - 1) / passes;
  return even >= smallest ? even : largest;
}

}  // namespace

int BatchPlanner::choose() const {
  const int b = asked_micro_batch();
  if (b > 0) return breakdown(b).fits() ? b : 0;
  if (options_.recompute != RecomputePolicy::automatic || !options_.account.limited())
    return evened_micro_batch(options_.batch, largest_fitting(options_.batch), smallest_);
  int fastest = 0;
  double best = 0;
  for (const MemoryBreakdown& m : weighed_micro_batches())
    if (m.fits() && m.expected_samples_per_second > best) {
      best = m.expected_samples_per_second;
      fastest = m.micro_batch;
    }
  return fastest;
}

}  // namespace cnn
