// Recomputation (docs/design.md, "Recomputation"): outputs dropped after forward and written
// again during backward give, on the CPU, the results of keeping them, to the bit; the plan
// holds fewer bytes for it; a budget that cannot hold a network without recomputation trains it.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "engine/plan/detail/step_plan.hpp"
#include "engine/train/planning_options.hpp"
#include "memory/host_resource.hpp"
#include "memory/statistics_adaptor.hpp"
#include <cnnengine/models/network_text.hpp>
#include "tests/engine/step_buffers.hpp"
#include "tests/engine/test_networks.hpp"

using namespace cnn;
using cnn::testing::SyntheticData;

namespace {

const Shape kImage{1, 8, 8};
constexpr int kClasses = 4;

Network make_model(const std::string& name) {
  return name == "resnet18+dropout" ? testing::resnet18_with_dropout(kImage, kClasses)
                                    : make_preset(name, kImage, kClasses);
}

// Two micro-batches a step: gradients accumulate across recomputed steps too. resnet18 reads its
// 11 million weights once per sample in each convolution: few samples keep the test quick.
int batch_of(const std::string& name) { return name == "resnet18+dropout" ? 6 : 16; }

TrainerOptions options(const std::string& name, RecomputePolicy policy, std::size_t budget) {
  TrainerOptions o = testing::constant_sgd(batch_of(name));
  o.micro_batch = batch_of(name) / 2;
  o.seed = 5;
  o.recompute = policy;
  o.memory_budget = budget;
  o.narrow_values = NarrowValues::always;  // in bf16: 16-bit values, whatever the plans' sizes
  return o;
}

// The fewest bytes recomputation reaches for `name` at its micro-batch: under a budget of one byte
// the planner reports the smallest plan it found.
std::size_t smallest_with_recomputation(const std::string& name, Precision precision) {
  Network net = make_model(name);
  CpuBackend backend(2, precision);
  const TrainerOptions o = options(name, RecomputePolicy::automatic, 1);
  const BatchPlanner planner(net, backend, planning_options(o, net, backend));
  const MemoryBreakdown m = planner.breakdown(o.micro_batch);
  REQUIRE_FALSE(m.fits());
  return m.total();
}

struct Trained {
  std::vector<double> losses;
  std::vector<float> parameters;  // running statistics included
  double test_loss = 0;
  MemoryBreakdown plan;
};

Trained train(const std::string& name, const TrainerOptions& o, int steps, Precision precision) {
  Network net = make_model(name);
  CpuBackend backend(2, precision);
  Trainer trainer(net, backend, memory::host_resource(), o);
  const int batch = o.batch;
  const SyntheticData data(batch * steps + 24, kImage, kClasses, 13);
  Trained t;
  t.plan = trainer.memory();
  for (int s = 0; s < steps; ++s) t.losses.push_back(trainer.train_step(data.batch(batch * s, batch)).loss);
  bool given = false;
  t.test_loss = trainer
                    .evaluate([&]() -> std::optional<Batch> {
                      if (std::exchange(given, true)) return std::nullopt;
                      return data.batch(batch * steps, 24);
                    })
                    .loss;
  t.parameters = trainer.parameters().download();
  return t;
}

// The most recomputation the planner finds (convolutions included), and with `with_cheap` cheap
// recomputation too, each against keeping: 20 steps, their losses, parameters and running
// statistics, and an evaluation. In bf16 the values between layers are stored in 16 bits: a
// recomputation widens the same 16-bit inputs and rounds its output as forward did.
void check_same_as_keeping(const std::string& name, bool with_cheap, Precision precision = Precision::fp32) {
  const Trained kept = train(name, options(name, RecomputePolicy::none, 0), 20, precision);
  const Trained most = train(name, options(name, RecomputePolicy::automatic, smallest_with_recomputation(name, precision)),
                             20, precision);
  CHECK(kept.plan.recomputed_layers == 0);
  CHECK(most.plan.recomputed_layers > 0);
  CHECK(most.plan.arena_bytes < kept.plan.arena_bytes);
  CHECK(most.losses == kept.losses);
  CHECK(most.parameters == kept.parameters);
  CHECK(most.test_loss == kept.test_loss);
  if (!with_cheap) return;
  const Trained cheap = train(name, options(name, RecomputePolicy::cheap, 0), 20, precision);
  CHECK(cheap.plan.recomputed_layers > 0);
  CHECK(most.plan.recomputed_layers > cheap.plan.recomputed_layers);
  CHECK(cheap.plan.arena_bytes < kept.plan.arena_bytes);
  CHECK(most.plan.arena_bytes < cheap.plan.arena_bytes);
  CHECK(cheap.losses == kept.losses);
  CHECK(cheap.parameters == kept.parameters);
  CHECK(cheap.test_loss == kept.test_loss);
}

}  // namespace

TEST_CASE("small-bn recomputing trains as keeping, to the bit", "[recompute][trainer]") {
  check_same_as_keeping("small-bn", true);
}

TEST_CASE("resnet recomputing trains as keeping, to the bit", "[recompute][trainer]") {
  check_same_as_keeping("resnet", true);
}

TEST_CASE("resnet with 16-bit values recomputing trains as keeping, to the bit", "[recompute][trainer][bf16]") {
  check_same_as_keeping("resnet", true, Precision::bf16);
}

// Its steps are the suite's costliest: cheap recomputation is checked on the two above. Under
// ASan and UBSan it took 172 s (the suite's slowest case; resnet above runs the same code there).
TEST_CASE("resnet18 with dropout recomputing trains as keeping, to the bit",
          "[recompute][trainer][slow_under_sanitizers]") {
  check_same_as_keeping("resnet18+dropout", false);
}

TEST_CASE("a network the budget cannot hold even at micro-batch 1 without recomputation trains with it",
          "[recompute][trainer][budget]") {
  const Shape image{1, 28, 28};
  CpuBackend backend(2);
  TrainerOptions o = testing::constant_sgd(8);
  o.recompute = RecomputePolicy::automatic;
  o.memory_budget = 1;
  std::size_t budget = 0, without = 0;
  {
    Network net = make_preset("resnet", image, kClasses);
    const BatchPlanner planner(net, backend, planning_options(o, net, backend));
    budget = planner.breakdown(1).total();  // the least recomputation reaches at micro-batch 1
    without = planner.breakdown(1, RecomputePolicy::none).total();
  }
  REQUIRE(budget < without);
  o.memory_budget = budget;
  TrainerOptions keeping = o;
  keeping.recompute = RecomputePolicy::none;
  Network refused = make_preset("resnet", image, kClasses);
  CHECK_THROWS_AS(Trainer(refused, backend, memory::host_resource(), keeping), BudgetTooSmall);

  Network net = make_preset("resnet", image, kClasses);
  memory::StatisticsAdaptor stats(memory::host_resource());
  Trainer trainer(net, backend, stats, o);
  CHECK(trainer.micro_batch() == 1);
  CHECK(trainer.memory().recomputed_layers > 0);
  const SyntheticData data(8 * 3, image, kClasses, 2);
  for (int s = 0; s < 3; ++s) CHECK(trainer.train_step(data.batch(8 * s, 8)).micro_batches == 8);
  CHECK(stats.statistics().peak_bytes <= budget);

  // What it learnt is what keeping learns with the memory to do so.
  Network reference = make_preset("resnet", image, kClasses);
  keeping.memory_budget = 0;
  keeping.micro_batch = 1;
  Trainer unbounded(reference, backend, memory::host_resource(), keeping);
  for (int s = 0; s < 3; ++s) unbounded.train_step(data.batch(8 * s, 8));
  CHECK(trainer.parameters().download() == unbounded.parameters().download());
}

TEST_CASE("under auto an out-of-memory failure in a step recomputes more at the same micro-batch",
          "[recompute][recovery][trainer]") {
  CpuBackend backend(2);
  const SyntheticData data(16 * 6, kImage, kClasses, 4);
  auto run = [&](bool inject, std::vector<std::string>& log) {
    testing::StepBufferStack buffers(memory::host_resource());
    if (inject) buffers.faults().fail_on({250});  // in the second step
    Network net = make_preset("resnet", kImage, kClasses);
    TrainerOptions o = options("resnet", RecomputePolicy::automatic, 0);
    Trainer trainer(net, backend, buffers.stack(), o);
    trainer.on_recovery = [&](const std::string& line) { log.push_back(line); };
    for (int s = 0; s < 6; ++s) CHECK(trainer.train_step(data.batch(16 * s, 16)).micro_batch == 8);
    if (inject) CHECK(buffers.faults().injected_failures() == 1);
    return trainer.parameters().download();
  };
  std::vector<std::string> clean_log, log;
  const std::vector<float> clean = run(false, clean_log), recovered = run(true, log);
  CHECK(clean_log.empty());
  REQUIRE(log.size() == 2);
  CHECK_THAT(log[0], Catch::Contains("replaying it at micro-batch 8 recomputing"));
  CHECK_THAT(log[1], Catch::Contains("micro-batch 8 back to 0 recomputed layers"));
  CHECK(recovered == clean);  // the same micro-batch: the same sums, to the bit
}
