// What recomputation asks of the plan (docs/design.md, "Recomputation"): every operation reads
// buffers live at its time step, forward drops what is recomputed, each policy recomputes what it
// says, and the bytes the planner predicts are the bytes the trainer reserves.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "engine/plan/detail/cost_model.hpp"
#include "engine/plan/detail/recompute_search.hpp"
#include "engine/plan/detail/step_plan.hpp"
#include "engine/train/planning_options.hpp"
#include "memory/budget_adaptor.hpp"
#include "memory/host_resource.hpp"
#include "memory/statistics_adaptor.hpp"
#include <cnnengine/models/network_text.hpp>
#include "tests/engine/test_networks.hpp"
#include "tests/heap_counter.hpp"

using namespace cnn;
using cnn::testing::SyntheticData;

namespace {

const Shape kImage{1, 12, 12};

// Goes through the operations as the step executor does, and checks that each buffer an
// operation reads or writes is live at its time step.
void check_reads_are_live(const Network& net, const StepPlan& p) {
  auto live = [&](int index, int t) {
    if (index < 0) return false;
    const memory::BufferRequest& r = p.requests[static_cast<std::size_t>(index)];
    return r.first_use <= t && t <= r.last_use;
  };
  std::vector<int> copy(static_cast<std::size_t>(net.size()), -1);  // latest recomputation, by node
  auto value = [&](int node) {
    const int v = net.node(node).value;
    const int c = copy[static_cast<std::size_t>(v)];
    return c >= 0 ? p.recomputations[static_cast<std::size_t>(c)].output : p.node(v).value;
  };
  auto saved = [&](int node, int recomputation) {
    if (recomputation >= 0 && !p.recomputations[static_cast<std::size_t>(recomputation)].saved.empty())
      return p.recomputations[static_cast<std::size_t>(recomputation)].saved;
    return p.node(node).saved;
  };
  for (int t = p.loss_time() + 1; t < p.time_steps; ++t) {
    const StepOp op = p.ops[static_cast<std::size_t>(t)];
    const Node& n = net.node(op.node);
    INFO("time " << t << ": " << (op.kind == StepOpKind::recompute ? "recompute " : "backward ") << n.name);
    if (op.kind == StepOpKind::recompute) {
      const RecomputeBuffers& r = p.recomputations[static_cast<std::size_t>(t)];
      for (int in : n.inputs) CHECK(live(value(in), t));
      CHECK(live(r.output, t));
      for (int s : saved(op.node, t)) CHECK(live(s, t));
      if (r.workspace >= 0) CHECK(live(r.workspace, t));
      copy[static_cast<std::size_t>(op.node)] = t;
      continue;
    }
    REQUIRE(op.kind == StepOpKind::backward);
    if (n.layer->is_view()) continue;
    if (n.layer->backward_needs_input())
      for (int in : n.inputs) CHECK(live(value(in), t));
    if (n.layer->backward_needs_output()) CHECK(live(value(op.node), t));
    for (int s : saved(op.node, copy[static_cast<std::size_t>(op.node)])) CHECK(live(s, t));
    CHECK(live(p.node(op.node).value_grad, t));
  }
  CHECK(memory::plan_is_valid(p.requests, p.plan));
}

// Every output that can be recomputed.
RecomputeSet everything(const Network& net) {
  RecomputeSet set(static_cast<std::size_t>(net.size()), false);
  for (int id = 0; id < net.size(); ++id) set[static_cast<std::size_t>(id)] = can_recompute(net, id);
  return set;
}

}  // namespace

TEST_CASE("with recomputation every operation reads live buffers, and forward keeps less", "[recompute][planner]") {
  CpuBackend backend(2);
  for (const std::string name : {"small-bn", "resnet", "resnet18+dropout"}) {
    INFO(name);
    Network net = name == "resnet18+dropout" ? testing::resnet18_with_dropout(kImage, 4) : make_preset(name, kImage, 4);
    const StepNeeds needs = step_needs(net, backend, 8, true, std::size_t{256} << 20);
    const CostModel cost(net, backend.compute_rates());
    const StepPlan kept = plan_step(net, needs);
    check_reads_are_live(net, kept);
    for (const RecomputeSet& set : {cheap_recompute_set(net, needs, cost), everything(net),
                                    least_recompute_within(net, needs, cost, kept.arena_bytes() / 2).set}) {
      const StepPlan p = plan_step(net, needs, set);
      REQUIRE_FALSE(p.recomputed.empty());
      check_reads_are_live(net, p);
      CHECK(p.arena_bytes() < kept.arena_bytes());
      // Forward's buffer of a recomputed output is given back before backward.
      for (int id : p.recomputed)
        CHECK(p.requests[static_cast<std::size_t>(p.node(id).value)].last_use < p.loss_time());
    }
  }
}

TEST_CASE("recomputing everything recomputes temporary copies for a residual chain, not early ones",
          "[recompute][planner]") {
  // Each residual block's output is read by the next block's addition: recomputing them all, the
  // next block needs a copy long before this block's backward. The copy it gets is temporary,
  // so at no time step are the block outputs all live again.
  CpuBackend backend(2);
  Network net = make_preset("resnet", kImage, 4);
  const StepNeeds needs = step_needs(net, backend, 8, true, std::size_t{256} << 20);
  const StepPlan p = plan_step(net, needs, everything(net));
  int copies_of_the_first_block = 0;
  const int first_block_output = 10;  // stem (3 nodes), then conv bn relu conv bn add relu
  REQUIRE(net.node(first_block_output).layer->type_name() == "relu");
  for (int id : p.recomputed) copies_of_the_first_block += id == first_block_output;
  CHECK(copies_of_the_first_block > 1);
  check_reads_are_live(net, p);
}

TEST_CASE("cheap recomputes element-wise and normalisation layers only, auto nothing it need not",
          "[recompute][planner]") {
  CpuBackend backend(2);
  Network net = make_preset("resnet", kImage, 4);
  TrainerOptions o = testing::constant_sgd(64);
  o.recompute = RecomputePolicy::cheap;
  const BatchPlanner cheap(net, backend, planning_options(o, net, backend));
  const StepNeeds needs = step_needs(net, backend, 64, true, o.workspace_limit);
  const CostModel cost(net, backend.compute_rates());
  const StepPlan p = plan_step(net, needs, cheap_recompute_set(net, needs, cost));
  REQUIRE_FALSE(p.recomputed.empty());
  for (int id : p.recomputed) CHECK(net.node(id).layer->cheap_to_recompute());
  CHECK(cheap.breakdown(64).recomputed_layers > 0);
  CHECK(cheap.breakdown(64).recompute_fraction > 0);

  o.recompute = RecomputePolicy::automatic;
  const BatchPlanner unbounded(net, backend, planning_options(o, net, backend));
  CHECK(unbounded.breakdown(64).recomputed_layers == 0);  // no budget: nothing to fit
  CHECK(unbounded.choose() == 64);
  o.memory_budget = unbounded.breakdown(64).total();
  const BatchPlanner roomy(net, backend, planning_options(o, net, backend));
  CHECK(roomy.breakdown(64).recomputed_layers == 0);  // fits as it is
  o.memory_budget -= (unbounded.breakdown(64).arena_bytes - unbounded.breakdown(32).arena_bytes) / 2;
  const BatchPlanner tight(net, backend, planning_options(o, net, backend));
  const MemoryBreakdown m = tight.breakdown(64);
  CHECK(m.fits());
  CHECK(m.recomputed_layers > 0);
  CHECK(m.recompute == RecomputePolicy::automatic);
}

TEST_CASE("under a budget auto fits a larger micro-batch, reserves what it predicts and allocates nothing in a step",
          "[recompute][planner][budget]") {
  CpuBackend backend(2);
  Network net = make_preset("resnet", kImage, 4);
  TrainerOptions o = testing::constant_sgd(128);
  const BatchPlanner probe(net, backend, planning_options(o, net, backend));
  o.memory_budget = probe.breakdown(32).total();
  o.recompute = RecomputePolicy::automatic;
  const BatchPlanner planner(net, backend, planning_options(o, net, backend));
  const int plain = planner.largest_fitting(o.batch, RecomputePolicy::none);
  const int most = planner.largest_fitting(o.batch, RecomputePolicy::automatic);
  INFO("without recomputation " << plain << ", with " << most);
  CHECK(plain >= 32);
  CHECK(plain < 40);
  CHECK(most >= 2 * plain);

  o.micro_batch = most;
  memory::StatisticsAdaptor stats(memory::host_resource());
  memory::BudgetAdaptor capped(stats, o.memory_budget);
  Trainer trainer(net, backend, capped, o);
  REQUIRE(trainer.micro_batch() == most);
  CHECK(trainer.memory().recomputed_layers > 0);
  CHECK(stats.statistics().current_bytes == planner.breakdown(most).total());
  SyntheticData data(o.batch * 3, kImage, 4, 6);
  trainer.train_step(data.batch(0, o.batch));  // warm-up: lazily built thread pools
  const auto before = stats.statistics();
  const long heap_before = testing::heap_allocations();
  for (int s = 1; s < 3; ++s) trainer.train_step(data.batch(s * o.batch, o.batch));
  CHECK(testing::heap_allocations() == heap_before);
  CHECK(stats.statistics().allocations == before.allocations);
  CHECK(stats.statistics().peak_bytes == planner.breakdown(most).total());
}

TEST_CASE("auto weighs micro-batches by expected throughput and takes the fastest", "[recompute][planner]") {
  CpuBackend backend(2);
  Network net = make_preset("resnet", kImage, 4);
  TrainerOptions o = testing::constant_sgd(128);
  const BatchPlanner probe(net, backend, planning_options(o, net, backend));
  o.memory_budget = probe.breakdown(16).total();
  o.recompute = RecomputePolicy::automatic;
  const BatchPlanner planner(net, backend, planning_options(o, net, backend));
  const std::vector<MemoryBreakdown> weighed = planner.weighed_micro_batches();
  REQUIRE(weighed.size() >= 2);
  CHECK(weighed.front().micro_batch == planner.largest_fitting(o.batch, RecomputePolicy::none));
  CHECK(weighed.front().recomputed_layers == 0);
  const MemoryBreakdown* fastest = &weighed.front();
  for (const MemoryBreakdown& m : weighed) {
    CHECK(m.fits());
    CHECK(m.expected_samples_per_second > 0);
    if (m.expected_samples_per_second > fastest->expected_samples_per_second) fastest = &m;
  }
  CHECK(planner.choose() == fastest->micro_batch);
  CHECK(weighed.back().recomputed_layers > 0);
}

TEST_CASE("recomputation policies by name", "[recompute]") {
  for (RecomputePolicy policy : {RecomputePolicy::none, RecomputePolicy::cheap, RecomputePolicy::automatic})
    CHECK(parse_recompute_policy(to_string(policy)) == policy);
  CHECK(to_string(RecomputePolicy::automatic) == "auto");
  CHECK_THROWS_AS(parse_recompute_policy("all"), ConfigError);
  CHECK_THROWS_WITH(parse_recompute_policy("all"), Catch::Contains("none, cheap or auto"));
}

namespace {

// conv then `relus` ReLUs: the chain on which the descent recomputed every ReLU from the conv.
Network relu_chain(int relus) {
  std::string text = "conv 4 3 pad=1\n";
  for (int i = 0; i < relus; ++i) text += "relu\n";
  return parse_network(text + "flatten\ndense 4\n", kImage, 4);
}

// `blocks` of conv, BatchNorm, ReLU, and a residual addition every other block.
Network deep_residual(int blocks) {
  std::string text = "conv 4 3 pad=1 as=b0\n";
  for (int i = 1; i <= blocks; ++i) {
    text += "conv 4 3 pad=1\nbatchnorm\nrelu";
    if (i % 2 == 0) text += "\nadd b" + std::to_string(i - 2);
    text += " as=b" + std::to_string(i) + "\n";
  }
  return parse_network(text + "flatten\ndense 4\n", kImage, 4);
}

// One of the two deep networks (0: a ReLU chain, 1: residual blocks), past the descent's limit,
// with a training step's needs at micro-batch 4 and its cost model.
struct DeepStep {
  DeepStep(int kind, Backend& backend)
      : net(kind == 0 ? relu_chain(400) : deep_residual(60)),
        needs(step_needs(net, backend, 4, true, std::size_t{256} << 20)),
        cost(net, backend.compute_rates()) {}
  Network net;
  StepNeeds needs;
  CostModel cost;
};

int most_recomputations_of_one_node(const StepPlan& p) {
  std::vector<int> times(p.nodes.size(), 0);
  for (int id : p.recomputed) ++times[static_cast<std::size_t>(id)];
  return *std::max_element(times.begin(), times.end());
}

}  // namespace

TEST_CASE("the small presets are planned by the descent, deeper networks by the sweep", "[recompute][planner]") {
  for (const std::string name : {"small", "small-bn", "resnet", "resnet18"})
    CHECK(make_preset(name, Shape{3, 32, 32}, 10).size() <= kDescentLimit);
  for (const std::string name : {"resnet50", "densenet"})
    CHECK(make_preset(name, Shape{3, 32, 32}, 10).size() > kDescentLimit);
  CHECK(relu_chain(400).size() > kDescentLimit);
  CHECK(deep_residual(60).size() > kDescentLimit);
}

TEST_CASE("cheap on a deep chain recomputes each output at most once, lowers the peak and reads live buffers",
          "[recompute][planner]") {
  CpuBackend backend(2);
  for (int kind = 0; kind < 2; ++kind) {
    const DeepStep deep(kind, backend);
    const Network& net = deep.net;
    const StepNeeds& needs = deep.needs;
    const CostModel& cost = deep.cost;
    const StepPlan none = plan_step(net, needs);
    const StepPlan p = plan_step(net, needs, cheap_recompute_set(net, needs, cost));
    REQUIRE_FALSE(p.recomputed.empty());
    for (int id : p.recomputed) CHECK(net.node(id).layer->cheap_to_recompute());
    // A ReLU's BatchNorm comes along with it, and an addition's ReLU: each once per reader.
    CHECK(most_recomputations_of_one_node(p) <= 2);
    CHECK(p.recomputed.size() <= static_cast<std::size_t>(net.size()));
    CHECK(p.plan.lower_bound_bytes < none.plan.lower_bound_bytes);
    check_reads_are_live(net, p);
  }
}

TEST_CASE("auto on a deep network takes the fewest sweep moves that fit, or says nothing fits",
          "[recompute][planner]") {
  CpuBackend backend(2);
  for (int kind = 0; kind < 2; ++kind) {
    const DeepStep deep(kind, backend);
    const Network& net = deep.net;
    const StepNeeds& needs = deep.needs;
    const CostModel& cost = deep.cost;
    const std::size_t none = plan_step(net, needs).arena_bytes();
    const std::size_t cheap = plan_step(net, needs, cheap_recompute_set(net, needs, cost)).arena_bytes();
    REQUIRE(cheap < none);
    const std::size_t cap = (cheap + none) / 2;
    const RecomputeChoice fitting = least_recompute_within(net, needs, cost, cap);
    CHECK(fitting.fits);
    CHECK(fitting.plan.arena_bytes() <= cap);
    CHECK(most_recomputations_of_one_node(fitting.plan) <= 2);
    check_reads_are_live(net, fitting.plan);
    const RecomputeChoice roomy = least_recompute_within(net, needs, cost, none);
    CHECK(roomy.fits);
    CHECK(roomy.plan.recomputed.empty());
    const RecomputeChoice hopeless = least_recompute_within(net, needs, cost, 1024);
    CHECK_FALSE(hopeless.fits);
    CHECK(hopeless.plan.arena_bytes() <= none);
  }
}
