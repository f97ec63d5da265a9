// Bad numbers never reach the weights: optimizer settings are checked, and a step whose loss is
// NaN or infinite is refused before the optimizer runs.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "backends/cpu/cpu_backend.hpp"
#include <cnnengine/base/error.hpp>
#include "memory/host_resource.hpp"
#include <cnnengine/models/network_text.hpp>
#include "tests/engine/test_networks.hpp"

using namespace cnn;
using cnn::testing::SyntheticData;

namespace {

const Shape kImage{1, 12, 12};
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::string optimizer_error(const OptimizerConfig& config) {
  try {
    make_optimizer(config);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a step with a NaN loss throws TrainingDiverged and changes nothing", "[trainer][diverged]") {
  const std::string text = testing::kOverflowingNetwork;
  TrainerOptions o;
  o.batch = 8;
  o.optimizer.kind = OptimizerKind::adamw;  // its step count and moments would show a step that ran
  CpuBackend backend(1);
  Network clean_net = parse_network(text, kImage, 4), tested_net = parse_network(text, kImage, 4);
  Trainer clean(clean_net, backend, memory::host_resource(), o);
  Trainer tested(tested_net, backend, memory::host_resource(), o);
  testing::fill_parameter(clean, clean_net, 1, "weight", 1.0f);
  testing::fill_parameter(tested, tested_net, 1, "weight", 1.0f);
  SyntheticData data(16, kImage, 4, 3);
  SyntheticData poisoned = data;
  std::fill_n(poisoned.images.begin(), kImage.elements(), std::numeric_limits<float>::max());  // sample 0

  clean.train_step(data.batch(0, 8));
  tested.train_step(data.batch(0, 8));
  const std::vector<float> before = tested.parameters().download();
  try {
    tested.train_step(poisoned.batch(0, 8));
    FAIL("a NaN loss was accepted");
  } catch (const TrainingDiverged& e) {
    CHECK(e.step() == 2);
    CHECK(std::isnan(e.loss()));
    CHECK(std::string(e.what()).find("training diverged at step 2: the loss is") != std::string::npos);
  }
  CHECK(tested.steps() == 1);
  const std::vector<float> after = tested.parameters().download();
  CHECK(after == before);  // no NaN anywhere, so == compares every value

  // The optimizer state is untouched too: the next step is the clean run's next step.
  clean.train_step(data.batch(8, 8));
  tested.train_step(data.batch(8, 8));
  CHECK(tested.parameters().download() == clean.parameters().download());
}

TEST_CASE("in fp16 a NaN loss from values beyond half's range says so, where fp32 trains on", "[trainer][diverged][fp16]") {
  // A sample at 1e5: finite in float, beyond half's 65504, so infinite as an fp16 product's operand.
  const std::string text = "conv 4 3 pad=1\nbatchnorm\nmaxpool 2\nflatten\ndense 4\n";
  TrainerOptions o;
  o.batch = 8;
  SyntheticData data(8, kImage, 4, 3);
  std::fill_n(data.images.begin(), kImage.elements(), 1e5f);
  CpuBackend fp32(1), fp16(1, Precision::fp16);
  Network fp32_net = parse_network(text, kImage, 4), fp16_net = parse_network(text, kImage, 4);
  Trainer fine(fp32_net, fp32, memory::host_resource(), o);
  CHECK(std::isfinite(fine.train_step(data.batch(0, 8)).loss));
  Trainer tested(fp16_net, fp16, memory::host_resource(), o);
  try {
    tested.train_step(data.batch(0, 8));
    FAIL("a NaN loss was accepted");
  } catch (const TrainingDiverged& e) {
    CHECK(e.step() == 1);
    CHECK_THAT(e.what(), Catch::Contains("training diverged at step 1 in fp16: the loss is") &&
                             Catch::Contains("65504") && Catch::Contains("try bf16"));
  }
  CHECK(tested.steps() == 0);
}

TEST_CASE("optimizer settings that are NaN, infinite or out of range are refused", "[optimizer]") {
  OptimizerConfig good;
  CHECK(optimizer_error(good).empty());
  auto with = [&](auto change) {
    OptimizerConfig c = good;
    change(c);
    return optimizer_error(c);
  };
  CHECK(with([](auto& c) { c.learning_rate = kNaN; }).find("learning rate must be positive") != std::string::npos);
  CHECK(with([](auto& c) { c.learning_rate = std::numeric_limits<float>::infinity(); }).find("learning rate") !=
        std::string::npos);
  CHECK(with([](auto& c) { c.learning_rate = 0; }).find("learning rate") != std::string::npos);
  CHECK(with([](auto& c) { c.weight_decay = kNaN; }).find("weight decay") != std::string::npos);
  CHECK(with([](auto& c) { c.weight_decay = -1.f; }).find("weight decay must be at least 0") != std::string::npos);
  CHECK(with([](auto& c) { c.momentum = kNaN; }).find("momentum") != std::string::npos);
  CHECK(with([](auto& c) { c.momentum = 1.f; }).find("momentum must be at least 0 and below 1") != std::string::npos);
  CHECK(with([](auto& c) { c.beta2 = 1.5f; }).find("beta2") != std::string::npos);
  CHECK(with([](auto& c) { c.epsilon = 0; }).find("epsilon") != std::string::npos);
}
