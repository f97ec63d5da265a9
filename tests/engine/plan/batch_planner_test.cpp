// The planner's prediction is exact: what it says micro-batch b needs is what the trainer
// reserves, so the largest b it finds fits and b + 1 does not; and no micro-batch is larger than
// the backend can hold in one tensor.
#include <catch2/catch.hpp>

#include <string>

#include "backends/cpu/cpu_backend.hpp"
#include "engine/core/forwarding_backend.hpp"
#include "engine/infer/inference_planner.hpp"
#include "engine/train/planning_options.hpp"
#include <cnnengine/engine/train/trainer.hpp>
#include "memory/budget_adaptor.hpp"
#include "memory/host_resource.hpp"
#include "memory/statistics_adaptor.hpp"
#include <cnnengine/models/network_text.hpp>
#include "tests/engine/test_networks.hpp"

using namespace cnn;

TEST_CASE("the predicted largest micro-batch is the true largest", "[budget][planner]") {
  CpuBackend backend(2);
  for (const char* model : {"small", "small-bn", "resnet"}) {
    const Shape image{1, 28, 28};
    Network net = make_preset(model, image, 10);
    TrainerOptions o;
    o.batch = 512;
    // A budget that holds a micro-batch of about 100.
    const BatchPlanner probe(net, backend, planning_options(o, net, backend));
    o.memory_budget = probe.breakdown(100).total() + 1000;
    const BatchPlanner planner(net, backend, planning_options(o, net, backend));
    const int b = planner.largest_fitting(o.batch);
    INFO(model << ": largest micro-batch " << b);
    REQUIRE(b >= 100);
    REQUIRE(b < 110);
    CHECK(planner.breakdown(b + 1).total() > o.memory_budget);

    memory::StatisticsAdaptor stats(memory::host_resource());
    memory::BudgetAdaptor capped(stats, o.memory_budget);
    Trainer trainer(net, backend, capped, o);
    // As many passes as the largest takes, each as even as can be (Note [Even micro-batches]).
    const int passes = (o.batch + b - 1) / b, even = (o.batch + passes - 1) / passes;
    CHECK(planner.choose() == even);
    CHECK(trainer.micro_batch() == even);
    // What the plan predicted is exactly what was reserved.
    CHECK(stats.statistics().current_bytes == planner.breakdown(even).total());
    testing::SyntheticData data(o.batch, image, 10, 4);
    const StepReport r = trainer.train_step(data.batch(0, o.batch));
    CHECK(r.samples == 512);
    CHECK(r.micro_batches == passes);
    CHECK(stats.statistics().peak_bytes == planner.breakdown(even).total());
    CHECK(stats.statistics().peak_bytes <= o.memory_budget);
  }
}

TEST_CASE("the chosen micro-batch splits the batch evenly: 256 where 17 fits is 16 passes of 16, not 15 of 17 and 1",
          "[budget][planner]") {
  CpuBackend backend(1);
  Network net = make_preset("small", Shape{1, 28, 28}, 10);
  TrainerOptions o;
  o.batch = 256;
  const BatchPlanner probe(net, backend, planning_options(o, net, backend));
  o.memory_budget = probe.breakdown(17).total() + 100;
  const BatchPlanner planner(net, backend, planning_options(o, net, backend));
  REQUIRE(planner.largest_fitting(o.batch) == 17);
  CHECK(planner.choose() == 16);
  o.micro_batch = 17;  // asked for: kept
  CHECK(BatchPlanner(net, backend, planning_options(o, net, backend)).choose() == 17);
}

TEST_CASE("where the plan dips from one micro-batch to the next, the largest that fits is still found",
          "[budget][planner]") {
  CpuBackend backend(1);
  Network net = make_preset("resnet18", Shape{3, 32, 32}, 10);
  TrainerOptions o;
  o.batch = 160;
  const BatchPlanner probe(net, backend, planning_options(o, net, backend));
  // The greedy planner is nearly, not exactly, monotone: find a micro-batch whose plan is
  // smaller than the one before it (resnet18 has them, e.g. 149).
  int dip = 0;
  for (int b = 2; b <= o.batch && !dip; ++b)
    if (probe.breakdown(b).total() < probe.breakdown(b - 1).total()) dip = b;
  if (!dip) {
    WARN("no dip in resnet18's plans up to " << o.batch << ": nothing to check");
    return;
  }
  o.memory_budget = probe.breakdown(dip).total();  // holds `dip`, not `dip - 1`
  const BatchPlanner planner(net, backend, planning_options(o, net, backend));
  INFO("dip at micro-batch " << dip);
  CHECK(planner.largest_fitting(dip) == dip);
}

namespace {

// A CPU backend whose convolutions could also use a method that wants 4 MiB more workspace
// when it is allowed that much, as cuDNN's faster algorithms do. The kernels themselves run on
// the CPU's im2col workspace, which is the lean answer.
class WorkspaceHungryBackend : public CpuBackend {
 public:
  using CpuBackend::CpuBackend;
  static constexpr std::size_t kExtra = std::size_t{4} << 20;
  std::size_t do_conv2d_workspace_bytes(const Conv2dDesc& desc, const Shape& x, const Shape& y, ConvPass pass,
                                        std::size_t limit) override {
    const std::size_t lean = CpuBackend::do_conv2d_workspace_bytes(desc, x, y, pass, limit);
    return limit >= lean + kExtra ? lean + kExtra : lean;
  }
};

}  // namespace

TEST_CASE("under a budget the planner gives up workspace before it gives up micro-batch", "[budget][planner]") {
  WorkspaceHungryBackend backend(2);
  const Shape image{1, 28, 28};
  Network net = make_preset("small", image, 10);
  TrainerOptions o;
  o.batch = 64;
  const std::size_t hungry = BatchPlanner(net, backend, planning_options(o, net, backend)).breakdown(64).total();
  BatchPlanOptions lean_options = planning_options(o, net, backend);
  lean_options.workspace_limit = 0;
  const std::size_t lean = BatchPlanner(net, backend, lean_options).breakdown(64).total();
  REQUIRE(lean < hungry);  // 24.6 against 28.1 MB

  o.memory_budget = lean + 1000;  // the whole batch fits only with the lean method
  const BatchPlanner planner(net, backend, planning_options(o, net, backend));
  CHECK(planner.choose() == 64);
  const MemoryBreakdown chosen = planner.breakdown(64);
  CHECK(chosen.workspace_limit < planning_options(o, net, backend).workspace_limit);
  CHECK(chosen.total() <= o.memory_budget);

  memory::StatisticsAdaptor stats(memory::host_resource());
  memory::BudgetAdaptor capped(stats, o.memory_budget);
  Trainer trainer(net, backend, capped, o);
  CHECK(trainer.micro_batch() == 64);
  CHECK(stats.statistics().current_bytes == chosen.total());  // what was planned is what was built
  testing::SyntheticData data(64, image, 10, 4);
  CHECK(trainer.train_step(data.batch(0, 64)).samples == 64);
  CHECK(stats.statistics().peak_bytes <= o.memory_budget);

  // Without a budget the hungry method is planned; where the backend has nothing leaner (the
  // plain CPU backend) a budget lowers the micro-batch instead.
  o.memory_budget = 0;
  CHECK(BatchPlanner(net, backend, planning_options(o, net, backend)).breakdown(64).total() == hungry);
  CpuBackend plain(2);
  o.memory_budget = BatchPlanner(net, plain, planning_options(o, net, plain)).breakdown(64).total() - 1;
  const BatchPlanner refused(net, plain, planning_options(o, net, plain));
  CHECK(refused.choose() < 64);
  CHECK(refused.breakdown(64).workspace_limit ==
        std::min(planning_options(o, net, plain).workspace_limit, o.memory_budget));
}

TEST_CASE("a micro-batch and an accumulation count together are refused", "[planner]") {
  CpuBackend backend(1);
  Network net = make_preset("small", Shape{1, 12, 12}, 4);
  BatchPlanOptions o;
  o.batch = 8;
  o.micro_batch = 3;
  o.accumulate = 2;
  CHECK_THROWS_WITH(BatchPlanner(net, backend, o), Catch::Contains("not both"));
}

namespace {

// The CPU backend, holding at most `most` values in one tensor (as cuDNN's int descriptors do).
class SmallTensorsBackend : public ForwardingBackend {
 public:
  SmallTensorsBackend(Backend& inner, std::size_t most) : ForwardingBackend(inner), most_(most) {}
  std::size_t largest_tensor_elements() const override { return most_; }

 private:
  std::size_t most_;
};

}  // namespace

TEST_CASE("micro-batches stay within the largest tensor the backend holds", "[planner]") {
  CpuBackend cpu(1);
  const Shape image{1, 28, 28};
  // small's largest value a sample: the first convolution's output, 32 x 28 x 28 = 25,088 values.
  SmallTensorsBackend backend(cpu, 25088 * 40 + 100);
  Network net = make_preset("small", image, 10);
  TrainerOptions o;
  o.batch = 256;
  const BatchPlanner planner(net, backend, planning_options(o, net, backend));
  CHECK(planner.largest_fitting(o.batch) == 40);
  CHECK(planner.choose() == 37);  // 7 even passes (Note [Even micro-batches])

  o.micro_batch = 41;
  try {
    const BatchPlanner refused(net, backend, planning_options(o, net, backend));
    FAIL("micro-batch 41 was planned");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()).find("at most 40 samples a micro-batch") != std::string::npos);
  }

  InferenceOptions inference;
  inference.max_batch = 256;
  const InferencePlanner predictor_planner(net, backend, inference);
  CHECK(predictor_planner.largest_fitting() == 40);
}
