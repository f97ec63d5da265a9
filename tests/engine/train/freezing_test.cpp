// Fine-tuning with frozen layers (Network::freeze_through): the frozen parameters and running
// statistics never change, the rest trains as it would (the first step's updates are those of
// the whole network's), the plan keeps nothing for the frozen layers' backward and holds no
// gradient or optimizer state for them, so that a frozen backbone fits far larger micro-batches.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "engine/plan/batch_planner.hpp"
#include "engine/train/planning_options.hpp"
#include "memory/budget_adaptor.hpp"
#include "memory/host_resource.hpp"
#include "memory/statistics_adaptor.hpp"
#include <cnnengine/models/network_text.hpp>
#include "tests/engine/test_networks.hpp"
#include "tests/relative_error.hpp"

using namespace cnn;
using cnn::testing::relative_error;
using cnn::testing::SyntheticData;

namespace {

const Shape kImage{1, 12, 12};

TrainerOptions sgd(int batch) {
  TrainerOptions o;
  o.batch = batch;
  o.optimizer.kind = OptimizerKind::sgd;
  o.optimizer.learning_rate = 0.05f;
  o.schedule.kind = ScheduleKind::constant;
  return o;
}

// The parameters before and after `steps` steps of `net` frozen through `frozen`.
struct Trained {
  std::vector<float> before, after;
  std::vector<ParameterStore::Place> places;
};
Trained train(Network net, int frozen, const TrainerOptions& options, int steps, FrozenMode mode = FrozenMode::eval) {
  net.freeze_through(frozen);
  net.set_frozen_mode(mode);
  CpuBackend backend(1);
  Trainer trainer(net, backend, memory::host_resource(), options);
  Trained t{trainer.parameters().download(), {}, ParameterStore::places(net)};
  SyntheticData data(options.batch * steps, kImage, 4, 3);
  for (int s = 0; s < steps; ++s) trainer.train_step(data.batch(s * options.batch, options.batch));
  t.after = trainer.parameters().download();
  return t;
}

std::vector<float> values_of(const std::vector<float>& block, const ParameterStore::Place& p) {
  return {block.begin() + static_cast<std::ptrdiff_t>(p.offset),
          block.begin() + static_cast<std::ptrdiff_t>(p.offset + p.shape.elements())};
}

}  // namespace

TEST_CASE("frozen layers keep their parameters and running statistics, and the layers after them train", "[freeze]") {
  const Network probe = make_preset("small-bn", kImage, 4);
  const int head = probe.last();
  for (int frozen : {2, 6, head - 1}) {
    INFO("frozen through node " << frozen);
    const Trained t = train(make_preset("small-bn", kImage, 4), frozen, sgd(8), 3);
    for (const ParameterStore::Place& p : t.places) {
      INFO(p.node << " " << p.name);
      if (p.node <= frozen) CHECK(values_of(t.after, p) == values_of(t.before, p));
      else if (p.name != "running_mean" && p.name != "running_var") CHECK(values_of(t.after, p) != values_of(t.before, p));
    }
  }
}

TEST_CASE("the first step trains the layers after the frozen ones as the whole network's step does", "[freeze]") {
  // No BatchNorm or dropout before the head: the frozen layers compute in inference mode what
  // they compute in training, so the gradients that reach the trained layers are the same.
  const Network probe = make_preset("small", kImage, 4);
  const Trained whole = train(make_preset("small", kImage, 4), 0, sgd(16), 1);
  for (int frozen : {1, 4, probe.last() - 1}) {
    INFO("frozen through node " << frozen);
    const Trained part = train(make_preset("small", kImage, 4), frozen, sgd(16), 1);
    CHECK(part.before == whole.before);
    for (const ParameterStore::Place& p : part.places)
      if (p.node > frozen) CHECK(relative_error(values_of(part.after, p), values_of(whole.after, p)) < 1e-6);
  }
}

TEST_CASE("a frozen backbone has no gradients, optimizer state or saved values, and fits twice the micro-batch",
          "[freeze][planner]") {
  CpuBackend backend(1);
  const Shape image{3, 32, 32};
  Network whole = make_preset("resnet18", image, 10);
  Network frozen = make_preset("resnet18", image, 10);
  frozen.freeze_through(frozen.last() - 1);  // all but the head
  TrainerOptions o;
  o.batch = 256;
  const BatchPlanner full_planner(whole, backend, planning_options(o, whole, backend));
  o.memory_budget = full_planner.breakdown(16).total();
  const BatchPlanner full(whole, backend, planning_options(o, whole, backend));
  const BatchPlanner tuned(frozen, backend, planning_options(o, frozen, backend));
  const int full_batch = full.largest_fitting(o.batch), tuned_batch = tuned.largest_fitting(o.batch);
  INFO("largest micro-batch: " << full_batch << " trained whole, " << tuned_batch << " with its backbone frozen");
  CHECK(full_batch == 16);
  CHECK(tuned_batch >= 2 * full_batch);

  const MemoryBreakdown b = tuned.breakdown(16);
  const std::size_t head = (512 * 10 + 16) * sizeof(float);  // the dense layer's weight and bias, padded
  CHECK(b.persistent[memory::Category::parameter_gradients] == head);
  CHECK(b.persistent[memory::Category::optimizer_state] == 2 * head);  // AdamW's two slots
  CHECK(b.arena_bytes < full.breakdown(16).arena_bytes / 2);

  // What was planned is what a step takes.
  memory::StatisticsAdaptor stats(memory::host_resource());
  memory::BudgetAdaptor capped(stats, o.memory_budget);
  o.micro_batch = tuned_batch;
  Trainer trainer(frozen, backend, capped, o);
  SyntheticData data(tuned_batch, image, 10, 5);
  trainer.train_step(data.batch(0, tuned_batch));
  CHECK(stats.statistics().peak_bytes <= o.memory_budget);
}

TEST_CASE("freezing is refused where it leaves nothing to train or names no node", "[freeze]") {
  Network net = make_preset("small", kImage, 4);
  CHECK_THROWS_AS(net.freeze_through(net.last()), ConfigError);
  CHECK_THROWS_AS(net.freeze_through(-1), ConfigError);
  Network tail = parse_network("conv 4 3\nflatten\ndense 4\nrelu\n", kImage, 0);
  CHECK_THROWS_WITH(tail.freeze_through(3), Catch::Matchers::Contains("no parameter to train"));
  tail.freeze_through(2);
  CHECK(tail.frozen(1));
  CHECK_FALSE(tail.frozen(3));
  CHECK_THAT(tail.summary(), Catch::Matchers::Contains("frozen: nodes 1 to 2"));
}

TEST_CASE("the backbone's rate scale moves its parameters by that share of the step, the head's as before",
          "[freeze][optimizer]") {
  const Network probe = make_preset("small", kImage, 4);
  const int backbone = probe.last() - 1;  // the head is the last dense layer
  TrainerOptions plain = sgd(16);
  plain.optimizer.momentum = 0;
  TrainerOptions scaled = plain;
  scaled.optimizer.backbone_through = backbone;
  scaled.optimizer.backbone_rate_scale = 0.25f;
  const Trained a = train(make_preset("small", kImage, 4), 0, plain, 1);
  const Trained b = train(make_preset("small", kImage, 4), 0, scaled, 1);
  REQUIRE(a.before == b.before);
  for (const ParameterStore::Place& p : a.places) {
    INFO(p.node << " " << p.name);
    std::vector<float> moved_a = values_of(a.after, p), moved_b = values_of(b.after, p);
    const std::vector<float> start = values_of(a.before, p);
    for (std::size_t i = 0; i < start.size(); ++i) {
      moved_a[i] = (moved_a[i] - start[i]) * (p.node <= backbone ? 0.25f : 1.f);
      moved_b[i] -= start[i];
    }
    // The moves are differences of parameters near 0.3 that moved by about 1e-4: float's rounding
    // of the parameters is up to 2e-4 of a move.
    CHECK(relative_error(moved_b, moved_a) < 1e-3);
  }
  TrainerOptions refused = plain;
  refused.optimizer.backbone_rate_scale = 0;
  CHECK_THROWS_WITH(train(make_preset("small", kImage, 4), 0, refused, 1),
                    Catch::Matchers::Contains("backbone rate scale must be positive"));
}

TEST_CASE("frozen layers in train mode update BatchNorm's running statistics as the whole network's step does",
          "[freeze]") {
  // BatchNorm on the batch's statistics and dropout dropping, as training runs them: the first
  // step's head and running statistics are the whole network's; the frozen weights stay.
  const Network probe = make_preset("small-bn", kImage, 4);
  const int frozen = probe.last() - 1;
  const Trained whole = train(make_preset("small-bn", kImage, 4), 0, sgd(16), 1);
  const Trained part = train(make_preset("small-bn", kImage, 4), frozen, sgd(16), 1, FrozenMode::train);
  for (const ParameterStore::Place& p : part.places) {
    INFO(p.node << " " << p.name);
    const bool statistic = p.name == "running_mean" || p.name == "running_var";
    if (p.node > frozen || statistic) CHECK(relative_error(values_of(part.after, p), values_of(whole.after, p)) < 1e-6);
    else CHECK(values_of(part.after, p) == values_of(part.before, p));
  }
}

TEST_CASE("frozen through the middle of residual blocks, the layers after train as the whole network's step does",
          "[freeze]") {
  // In train mode the frozen layers compute what training computes, so the first step of the rest
  // is the whole network's: through additions that read a frozen and a trained value, and with the
  // cheap layers recomputed during backward.
  const Network probe = make_preset("resnet", kImage, 4);
  for (RecomputePolicy policy : {RecomputePolicy::none, RecomputePolicy::cheap}) {
    TrainerOptions o = sgd(16);
    o.recompute = policy;
    const Trained whole = train(make_preset("resnet", kImage, 4), 0, o, 1);
    for (int frozen : {3, 7, 12, probe.last() - 1}) {
      INFO("frozen through node " << frozen << (policy == RecomputePolicy::cheap ? ", recomputing" : ""));
      const Trained part = train(make_preset("resnet", kImage, 4), frozen, o, 1, FrozenMode::train);
      for (const ParameterStore::Place& p : part.places) {
        INFO(p.node << " " << p.name);
        const bool statistic = p.name == "running_mean" || p.name == "running_var";
        if (p.node > frozen || statistic)
          CHECK(relative_error(values_of(part.after, p), values_of(whole.after, p)) < 1e-5);
        else
          CHECK(values_of(part.after, p) == values_of(part.before, p));
      }
    }
  }
}
