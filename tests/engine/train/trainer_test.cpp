// The trainer: determinism, micro-batch equivalence, budget refusal, no allocation per step.
#include <catch2/catch.hpp>
#include <cmath>

#include "backends/cpu/cpu_backend.hpp"
#include "engine/plan/detail/step_plan.hpp"
#include "engine/train/planning_options.hpp"
#include "layers/conv2d.hpp"
#include "layers/dense.hpp"
#include "layers/flatten.hpp"
#include "layers/relu.hpp"
#include "memory/host_resource.hpp"
#include "memory/statistics_adaptor.hpp"
#include <cnnengine/models/network_text.hpp>
#include "tests/engine/test_networks.hpp"
#include "tests/heap_counter.hpp"
#include "tests/relative_error.hpp"

using namespace cnn;
using cnn::testing::relative_error;
using cnn::testing::SyntheticData;

namespace {

const Shape kImage{1, 12, 12};

std::vector<float> train_steps(Network net, TrainerOptions options, int steps, std::vector<double>* losses = nullptr) {
  CpuBackend backend(2);
  Trainer trainer(net, backend, memory::host_resource(), options);
  SyntheticData data(options.batch * steps, kImage, 4, 11);
  for (int s = 0; s < steps; ++s) {
    const StepReport r = trainer.train_step(data.batch(s * options.batch, options.batch));
    if (losses) losses->push_back(r.loss);
  }
  return trainer.parameters().download();
}

std::vector<float> train_steps(const std::string& preset, TrainerOptions options, int steps,
                               std::vector<double>* losses = nullptr) {
  return train_steps(make_preset(preset, kImage, 4), std::move(options), steps, losses);
}

}  // namespace

TEST_CASE("the same seed gives the same losses", "[trainer]") {
  TrainerOptions o;
  o.batch = 16;
  o.seed = 5;
  for (const char* model : {"small", "small-bn", "resnet"}) {
    std::vector<double> first, second;
    train_steps(model, o, 6, &first);
    train_steps(model, o, 6, &second);
    INFO(model);
    CHECK(first == second);
    CHECK(first.back() < first.front());
  }
}

TEST_CASE("one micro-batch, 8 x 8 and uneven micro-batches give the same parameters", "[trainer][accumulate]") {
  TrainerOptions whole;
  whole.batch = 64;
  whole.optimizer.kind = OptimizerKind::sgd;
  whole.optimizer.learning_rate = 0.01f;  // at 0.05 an AVX2 build's split runs ended 3e-5 apart: see constant_sgd
  whole.schedule.kind = ScheduleKind::constant;
  const auto reference = train_steps("small", whole, 4);

  TrainerOptions eights = whole;
  eights.accumulate = 8;
  CHECK(relative_error(train_steps("small", eights, 4), reference) < 1e-5);

  TrainerOptions uneven = whole;
  uneven.micro_batch = 24;  // 24 + 24 + 16
  CHECK(relative_error(train_steps("small", uneven, 4), reference) < 1e-5);

  TrainerOptions adam = whole;
  adam.optimizer.kind = OptimizerKind::adamw;
  adam.optimizer.learning_rate = 1e-3f;
  TrainerOptions adam_split = adam;
  adam_split.micro_batch = 10;
  CHECK(relative_error(train_steps("small", adam_split, 3), train_steps("small", adam, 3)) < 1e-5);
}

TEST_CASE("with dropout, one micro-batch and 8 x 8 give the same parameters", "[trainer][accumulate]") {
  // Each sample's dropout mask depends on its place in the step's batch, not on the micro-batch.
  const std::string text = "conv 8 3 pad=1\nrelu\nmaxpool 2\nflatten\ndropout 0.5\ndense 16\nrelu\ndropout 0.3\ndense 4\n";
  TrainerOptions whole;
  whole.batch = 64;
  whole.optimizer.kind = OptimizerKind::sgd;
  whole.optimizer.learning_rate = 0.05f;
  whole.schedule.kind = ScheduleKind::constant;
  const auto reference = train_steps(parse_network(text, kImage, 4), whole, 4);
  TrainerOptions eights = whole;
  eights.accumulate = 8;
  CHECK(relative_error(train_steps(parse_network(text, kImage, 4), eights, 4), reference) < 1e-5);
  // The dropout does act: without it (same layers, same initial weights) training goes elsewhere.
  const std::string no_dropout = "conv 8 3 pad=1\nrelu\nmaxpool 2\nflatten\ndropout 0\ndense 16\nrelu\ndropout 0\ndense 4\n";
  CHECK(relative_error(train_steps(parse_network(no_dropout, kImage, 4), whole, 4), reference) > 1e-2);
}

TEST_CASE("a training step makes no allocation", "[trainer][memory]") {
  Network net = make_preset("small-bn", kImage, 4);
  CpuBackend backend(2);
  memory::StatisticsAdaptor stats(memory::host_resource());
  TrainerOptions o;
  o.batch = 32;
  o.micro_batch = 8;
  Trainer trainer(net, backend, stats, o);
  SyntheticData data(32 * 4, kImage, 4, 3);
  trainer.train_step(data.batch(0, 32));  // warm-up: lazily built thread pools
  const auto before = stats.statistics();
  const long heap_before = testing::heap_allocations();
  for (int s = 1; s < 4; ++s) trainer.train_step(data.batch(s * 32, 32));
  const auto after = stats.statistics();
  CHECK(after.allocations == before.allocations);
  CHECK(after.deallocations == before.deallocations);
  CHECK(after.peak_bytes == before.peak_bytes);
  CHECK(testing::heap_allocations() == heap_before);  // Eigen's and OpenMP's included
}

TEST_CASE("a budget too small is refused before step 1 with the byte table", "[trainer][budget]") {
  Network net = make_preset("small", kImage, 4);
  CpuBackend backend(2);
  TrainerOptions o;
  o.memory_budget = 64 * 1024;
  try {
    Trainer trainer(net, backend, memory::host_resource(), o);
    FAIL("the trainer accepted a budget that cannot fit");
  } catch (const BudgetTooSmall& e) {
    const std::string message = e.what();
    CHECK(message.find("parameters") != std::string::npos);
    CHECK(message.find("step arena") != std::string::npos);
    CHECK(message.find("DOES NOT FIT") != std::string::npos);
  }
}

TEST_CASE("a tight budget gives a smaller micro-batch and the requested batch", "[trainer][budget]") {
  Network net = make_preset("small", kImage, 4);
  CpuBackend backend(2);
  TrainerOptions probe;
  probe.batch = 64;
  Trainer ample(net, backend, memory::host_resource(), probe);
  const std::size_t at_16 = ample.breakdown(16).total();
  const std::size_t at_17 = ample.breakdown(17).total();
  REQUIRE(at_17 > at_16);

  TrainerOptions tight = probe;
  tight.memory_budget = at_16;
  Trainer trainer(net, backend, memory::host_resource(), tight);
  CHECK(trainer.micro_batch() == 16);
  SyntheticData data(64, kImage, 4, 9);
  const StepReport r = trainer.train_step(data.batch(0, 64));
  CHECK(r.samples == 64);
  CHECK(r.micro_batches == 4);
}

TEST_CASE("plans stay within 1.10 x the liveness lower bound", "[planner][trainer]") {
  CpuBackend backend(2);
  for (const char* model : {"small", "resnet"})
    for (int batch : {64, 256}) {
      Network net = make_preset(model, Shape{1, 28, 28}, 10);
      const StepPlan plan = plan_step(net, backend, batch, true, std::size_t{256} << 20);
      INFO(model << " at batch " << batch << ": " << plan.plan.arena_bytes << " / " << plan.plan.lower_bound_bytes);
      CHECK(memory::plan_is_valid(plan.requests, plan.plan));
      CHECK(plan.plan.overhead() <= 1.10);
    }
}

namespace {
// The sum of `count` inputs of one shape: a layer with more inputs than the step executor once
// had room for (a fixed array of 8 flags).
class SumOfInputs final : public Layer {
 public:
  explicit SumOfInputs(int count) : count_(count) {}
  std::string type_name() const override { return "sum"; }
  std::string describe() const override { return "sum of " + std::to_string(count_); }
  int input_count() const override { return count_; }
  Shape output_shape(const std::vector<Shape>& inputs) override { return inputs.at(0); }
  void forward(const LayerContext& c) override {
    c.backend->copy_or_add(c.inputs[0], c.output, false);
    for (std::size_t i = 1; i < c.inputs.size(); ++i) c.backend->copy_or_add(c.inputs[i], c.output, true);
  }
  void backward(const LayerContext& c) override {
    for (std::size_t i = 0; i < c.inputs.size(); ++i)
      if (wants_gradient(c, i)) c.backend->copy_or_add(c.grad_output, c.grad_inputs[i], c.accumulate[i]);
  }

 private:
  int count_;
};
}  // namespace

TEST_CASE("a layer may read more than eight inputs, the same one several times", "[trainer]") {
  CpuBackend backend(1);
  auto build = [](int count) {
    Network net(kImage);
    const int conv = net.emplace<Conv2D>(4, 3, 1, 1);
    const int relu = net.emplace<ReLU>();
    std::vector<int> inputs;
    for (int i = 0; i < count; ++i) inputs.push_back(i % 2 ? conv : relu);
    net.add(std::make_unique<SumOfInputs>(count), inputs);
    net.emplace<Flatten>();
    net.emplace<Dense>(4);
    return net;
  };
  TrainerOptions o = testing::constant_sgd(8);
  o.optimizer.learning_rate = 1e-3f;  // the sum of twelve is large
  SyntheticData data(8 * 3, kImage, 4, 13);
  Network twelve = build(12);
  Trainer trainer(twelve, backend, memory::host_resource(), o);
  std::vector<double> losses;
  for (int s = 0; s < 3; ++s) losses.push_back(trainer.train_step(data.batch(s * 8, 8)).loss);
  CHECK(losses.back() < losses.front());
  Network two = build(2);
  const BatchPlanOptions plan = planning_options(o, twelve, backend);
  CHECK(plan_step(twelve, backend, 8, true, plan.workspace_limit).node(3).accumulate.size() == 12);
  CHECK(plan_step(two, backend, 8, true, plan.workspace_limit).node(3).accumulate.size() == 2);
}

TEST_CASE("the learning-rate scale multiplies the schedule's rates from the next step, and is kept in the state",
          "[trainer]") {
  CpuBackend backend(1);
  Network net = make_preset("small", kImage, 4);
  TrainerOptions o;
  o.batch = 8;
  o.optimizer.learning_rate = 0.01f;
  o.schedule.kind = ScheduleKind::constant;
  Trainer trainer(net, backend, memory::host_resource(), o);
  SyntheticData data(32, kImage, 4, 3);
  CHECK(trainer.learning_rate() == Approx(0.01f));
  CHECK(trainer.train_step(data.batch(0, 8)).learning_rate == Approx(0.01f));
  trainer.set_learning_rate_scale(0.25f);
  CHECK(trainer.learning_rate() == Approx(0.0025f));
  CHECK(trainer.train_step(data.batch(8, 8)).learning_rate == Approx(0.0025f));
  CHECK(trainer.state().learning_rate_scale == 0.25f);

  TrainerState restored = trainer.state();
  restored.learning_rate_scale = 2;
  trainer.restore(restored);
  CHECK(trainer.train_step(data.batch(16, 8)).learning_rate == Approx(0.02f));
  for (float bad : {0.0f, -1.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    CHECK_THROWS_AS(trainer.set_learning_rate_scale(bad), ConfigError);
    restored.learning_rate_scale = bad;
    CHECK_THROWS_WITH(trainer.restore(restored), Catch::Contains("learning-rate scale"));
  }
  CHECK(trainer.learning_rate_scale() == 2.0f);
}
