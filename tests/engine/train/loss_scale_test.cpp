// fp16's dynamic loss scaling: the scale's moves (growth after an interval, backoff, the floor),
// a trainer in fp16 that skips a step whose gradients overflow without changing anything but the
// scale, stops at the floor with nothing applied, counts AdamW's steps as applied, and continues
// from its state exactly; bf16 and fp32 never scale.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "engine/core/forwarding_backend.hpp"
#include "engine/train/detail/loss_scaler.hpp"
#include <cnnengine/engine/train/trainer.hpp>
#include "memory/host_resource.hpp"
#include <cnnengine/models/network_text.hpp>
#include "tests/engine/test_networks.hpp"

using namespace cnn;

namespace {

const Shape kImage{1, 28, 28};
constexpr int kBatch = 32;

TrainerOptions fp16_options(long growth_interval = 2000) {
  TrainerOptions options = testing::constant_sgd(kBatch);
  options.optimizer.learning_rate = 0.05f;
  options.micro_batch = 16;
  options.seed = 3;
  options.loss_scale.growth_interval = growth_interval;
  return options;
}

// A trainer's parameters with their state, and its optimizer's state: what a checkpoint keeps.
struct Kept {
  std::vector<float> parameters, optimizer;
};
Kept kept_of(Trainer& trainer) {
  ParameterStore& store = trainer.parameters();
  using Block = ParameterStore::Block;
  Kept k{std::vector<float>(store.floats(Block::parameters)), std::vector<float>(store.floats(Block::optimizer_state))};
  store.download(Block::parameters, 0, k.parameters.size(), k.parameters.data());
  store.download(Block::optimizer_state, 0, k.optimizer.size(), k.optimizer.data());
  return k;
}
void put_back(Trainer& trainer, const Kept& k) {
  ParameterStore& store = trainer.parameters();
  using Block = ParameterStore::Block;
  store.upload(Block::parameters, 0, k.parameters.size(), k.parameters.data());
  store.upload(Block::optimizer_state, 0, k.optimizer.size(), k.optimizer.data());
}

}  // namespace

TEST_CASE("loss scale: grows after its interval, backs off to the floor, and says when it is there", "[loss_scale]") {
  LossScaleOptions o;
  o.initial = 8;
  o.floor = 2;
  o.growth_interval = 3;
  LossScaler scaler(o);
  scaler.step_applied();
  scaler.step_applied();
  CHECK(scaler.scale() == 8);
  scaler.step_applied();
  CHECK(scaler.scale() == 16);
  CHECK(scaler.steps_at_scale() == 0);
  scaler.step_applied();
  CHECK(scaler.step_overflowed());  // the count in a row starts again
  CHECK(scaler.scale() == 8);
  CHECK(scaler.steps_at_scale() == 0);
  CHECK(scaler.step_overflowed());
  CHECK(scaler.step_overflowed());
  CHECK(scaler.scale() == 2);
  scaler.step_applied();
  CHECK_FALSE(scaler.step_overflowed());  // at the floor: diverged, and nothing changed
  CHECK(scaler.scale() == 2);
  CHECK(scaler.steps_at_scale() == 1);

  scaler.restore(4, 1000);  // kept under a longer interval: grows at the next applied step
  CHECK(scaler.steps_at_scale() == 2);
  scaler.step_applied();
  CHECK(scaler.scale() == 8);

  o.initial = std::numeric_limits<float>::max();
  o.growth_interval = 1;
  LossScaler top(o);
  top.step_applied();
  CHECK(top.scale() == std::numeric_limits<float>::max());  // never to infinity
}

TEST_CASE("loss scale: settings out of range and kept states are refused by name", "[loss_scale]") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  auto refused = [](LossScaleOptions o, const char* words) { CHECK_THROWS_WITH(validate(o), Catch::Contains(words)); };
  LossScaleOptions o;
  for (float bad : {0.f, -1.f, nan, inf}) {
    o = {};
    o.floor = bad;
    refused(o, "the floor");
  }
  for (float bad : {0.5f, nan, inf}) {
    o = {};
    o.initial = bad;
    refused(o, "the initial scale");
  }
  for (float bad : {1.f, 0.5f, nan}) {
    o = {};
    o.growth_factor = bad;
    refused(o, "the growth factor");
  }
  for (float bad : {0.f, 1.f, 2.f, nan}) {
    o = {};
    o.backoff_factor = bad;
    refused(o, "the backoff factor");
  }
  o = {};
  o.growth_interval = 0;
  refused(o, "the growth interval");

  LossScaler scaler{LossScaleOptions{}};
  CHECK_THROWS_WITH(scaler.restore(0.5f, 0), Catch::Contains("loss scale of 0.5"));
  CHECK_THROWS_AS(scaler.restore(inf, 0), ConfigError);
  CHECK_THROWS_AS(scaler.restore(nan, 0), ConfigError);
  CHECK_THROWS_AS(scaler.restore(1024, -1), ConfigError);
  CHECK(scaler.scale() == 65536);

  // A trainer refuses a kept scale that is negative or not a number (0: none kept).
  Network net = make_preset("small", kImage, 10);
  CpuBackend backend(2, Precision::fp16);
  Trainer trainer(net, backend, memory::host_resource(), fp16_options());
  for (float bad : {-1.f, nan, inf}) {
    TrainerState state = trainer.state();
    state.loss_scale = bad;
    CHECK_THROWS_WITH(trainer.restore(state), Catch::Contains("loss scale of"));
  }
  TrainerState state = trainer.state();
  state.skipped_steps = 1;  // more than the steps
  CHECK_THROWS_WITH(trainer.restore(state), Catch::Contains("1 skipped steps of 0"));
  CHECK(trainer.loss_scale() == 65536);
}

TEST_CASE("fp16 training: a step whose gradients overflow is skipped, changing nothing but the scale", "[loss_scale]") {
  // The scale doubles after every applied step until the backward's half operands overflow.
  Network net = make_preset("small-bn", kImage, 10);
  CpuBackend backend(2, Precision::fp16);
  Trainer trainer(net, backend, memory::host_resource(), fp16_options(1));
  CHECK(trainer.loss_scale() == 65536);
  const testing::SyntheticData data(40 * kBatch, kImage, 10, 7);
  long skipped = 0;
  float last_scale = 0;
  for (int s = 0; s < 40 && skipped < 2; ++s) {
    const std::vector<float> before = trainer.parameters().download();
    const StepReport r = trainer.train_step(data.batch(s * kBatch, kBatch));
    CHECK(std::isfinite(r.loss));
    const std::vector<float> after = trainer.parameters().download();
    if (r.skipped) {
      ++skipped;
      CHECK(after == before);  // weights and BatchNorm's running statistics alike
      CHECK(trainer.loss_scale() == r.loss_scale / 2);
      CHECK(trainer.skipped_steps() == skipped);
    } else {
      CHECK(after != before);
      CHECK(trainer.loss_scale() == r.loss_scale * 2);
    }
    CHECK(r.step == s + 1);  // a skipped step is counted: its batch was used
    last_scale = r.loss_scale;
  }
  CHECK(skipped == 2);
  CHECK(last_scale > 65536);  // it grew before the gradients overflowed
  CHECK(trainer.state().skipped_steps == 2);
}

TEST_CASE("fp16 training stops at the loss scale's floor with nothing applied", "[loss_scale]") {
  Network net = make_preset("small", kImage, 10);
  CpuBackend backend(2, Precision::fp16);
  TrainerOptions options = fp16_options();
  options.loss_scale.initial = std::ldexp(1.0f, 100);  // far past half's range: every step overflows
  options.loss_scale.floor = std::ldexp(1.0f, 99);
  Trainer trainer(net, backend, memory::host_resource(), options);
  const testing::SyntheticData data(2 * kBatch, kImage, 10, 7);
  const std::vector<float> start = trainer.parameters().download();
  const StepReport first = trainer.train_step(data.batch(0, kBatch));
  CHECK(first.skipped);
  CHECK(trainer.loss_scale() == std::ldexp(1.0f, 99));
  try {
    trainer.train_step(data.batch(kBatch, kBatch));
    FAIL("no LossScaleAtFloor");
  } catch (const LossScaleAtFloor& e) {
    CHECK(e.step() == 2);
    CHECK_THAT(e.what(), Catch::Contains("training diverged at step 2 in fp16") &&
                             Catch::Contains("loss scale's floor") && Catch::Contains("not applied"));
  }
  CHECK(trainer.parameters().download() == start);
  CHECK(trainer.steps() == 1);
  CHECK(trainer.skipped_steps() == 1);
  CHECK(trainer.loss_scale() == std::ldexp(1.0f, 99));
}

TEST_CASE("fp16 training: AdamW counts the steps applied, as PyTorch's Adam, whose step() a skipped one never calls",
          "[loss_scale]") {
  // Records the step AdamW is given, then updates as the CPU does.
  struct AdamWSteps : ForwardingBackend {
    using ForwardingBackend::ForwardingBackend;
    std::vector<long> steps;
    void do_adamw_update(Tensor params, const Tensor& grads, Tensor m, Tensor v, const AdamWConfig& config,
                         float learning_rate, long step, const float* guard) override {
      steps.push_back(step);
      ForwardingBackend::do_adamw_update(params, grads, m, v, config, learning_rate, step, guard);
    }
  };
  Network net = make_preset("small", kImage, 10);
  CpuBackend cpu(2, Precision::fp16);
  AdamWSteps backend(cpu);
  TrainerOptions options = fp16_options();
  options.optimizer = OptimizerConfig{};                      // AdamW
  options.loss_scale.initial = std::ldexp(1.0f, 100);         // the first step overflows
  options.loss_scale.backoff_factor = std::ldexp(1.0f, -90);  // then 2^10: the rest do not
  Trainer trainer(net, backend, memory::host_resource(), options);
  const testing::SyntheticData data(3 * kBatch, kImage, 10, 7);
  CHECK(trainer.train_step(data.batch(0, kBatch)).skipped);
  CHECK_FALSE(trainer.train_step(data.batch(kBatch, kBatch)).skipped);
  CHECK_FALSE(trainer.train_step(data.batch(2 * kBatch, kBatch)).skipped);
  CHECK(trainer.steps() == 3);
  CHECK(backend.steps == std::vector<long>{1, 2});
}

TEST_CASE("fp16 training continues from its state with the same scale and losses", "[loss_scale]") {
  const testing::SyntheticData data(12 * kBatch, kImage, 10, 9);
  auto run = [&](int from, int to, Trainer& trainer) {
    std::vector<float> losses;
    for (int s = from; s < to; ++s)
      losses.push_back(static_cast<float>(trainer.train_step(data.batch(s * kBatch, kBatch)).loss));
    return losses;
  };
  // A growth interval of 4 and a pause after 6 steps: the kept state is 2 steps into one.
  CpuBackend backend(2, Precision::fp16);
  Network whole_net = make_preset("small", kImage, 10);
  Trainer whole(whole_net, backend, memory::host_resource(), fp16_options(4));
  const std::vector<float> straight = run(0, 12, whole);

  Network first_net = make_preset("small", kImage, 10);
  Trainer first(first_net, backend, memory::host_resource(), fp16_options(4));
  std::vector<float> resumed = run(0, 6, first);
  const TrainerState state = first.state();
  CHECK(state.loss_scale == first.loss_scale());
  CHECK(state.loss_scale_steps == 2);
  const Kept weights = kept_of(first);

  Network second_net = make_preset("small", kImage, 10);
  Trainer second(second_net, backend, memory::host_resource(), fp16_options(4));
  put_back(second, weights);
  second.restore(state);
  CHECK(second.loss_scale() == state.loss_scale);
  CHECK(second.skipped_steps() == state.skipped_steps);
  const std::vector<float> rest = run(6, 12, second);
  resumed.insert(resumed.end(), rest.begin(), rest.end());
  CHECK(resumed == straight);
  CHECK(second.loss_scale() == whole.loss_scale());
  CHECK(second.skipped_steps() == whole.skipped_steps());
  CHECK(second.state().loss_scale_steps == whole.state().loss_scale_steps);
}

TEST_CASE("bf16 and fp32 never scale the loss, nor does fp16 with scaling off", "[loss_scale]") {
  const testing::SyntheticData data(kBatch, kImage, 10, 7);
  for (Precision precision : {Precision::fp32, Precision::bf16, Precision::fp16}) {
    CAPTURE(to_string(precision));
    Network net = make_preset("small", kImage, 10);
    CpuBackend backend(2, precision);
    TrainerOptions options = fp16_options();
    options.loss_scale.enabled = precision != Precision::fp16;  // on where it does nothing, off in fp16
    Trainer trainer(net, backend, memory::host_resource(), options);
    const StepReport r = trainer.train_step(data.batch(0, kBatch));
    CHECK(r.loss_scale == 0);
    CHECK_FALSE(r.skipped);
    CHECK(trainer.loss_scale() == 0);
    CHECK(trainer.state().loss_scale == 0);
  }
}
