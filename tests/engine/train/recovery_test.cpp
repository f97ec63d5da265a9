// Out-of-memory inside a step: the engine halves the micro-batch and replays the same samples.
// And a sweep of budgets: every run trains within its budget or is refused before step 1.
#include <catch2/catch.hpp>
#include <cstdint>
#include <optional>

#include "backends/cpu/cpu_backend.hpp"
#include "layers/conv2d.hpp"
#include "layers/dense.hpp"
#include "layers/flatten.hpp"
#include "memory/fault_injection_adaptor.hpp"
#include "memory/host_resource.hpp"
#include <cnnengine/memory/memory_stack.hpp>
#include "memory/statistics_adaptor.hpp"
#include <cnnengine/models/network_text.hpp>
#include "tests/engine/recovery_checks.hpp"
#include "tests/engine/step_buffers.hpp"
#include "tests/engine/test_networks.hpp"
#include "tests/relative_error.hpp"

using namespace cnn;
using cnn::testing::relative_error;
using cnn::testing::check_budget_sweep;
using cnn::testing::constant_sgd;
using cnn::testing::run_with_injected_failures;
using cnn::testing::StepBufferStack;
using cnn::testing::SyntheticData;

namespace {

const Shape kImage{1, 12, 12};

Network small_with_dropout() { return cnn::testing::small_with_dropout(kImage, 4); }

}  // namespace

TEST_CASE("100 injected allocation failures change nothing but the micro-batch", "[recovery][trainer]") {
  CpuBackend backend(2);
  const int batch = 16, steps = 600;
  const auto clean = run_with_injected_failures(backend, memory::host_resource(), 0, batch, steps);
  const auto faulty = run_with_injected_failures(backend, memory::host_resource(), 100, batch, steps, clean.requests);
  CHECK(faulty.injected == 100);
  CHECK(faulty.recoveries >= 100);
  CHECK(faulty.samples == clean.samples);
  CHECK(clean.samples == static_cast<long>(batch) * steps);
  // Without BatchNorm (whose statistics are per micro-batch, docs/design.md) a replay at a smaller
  // micro-batch differs by the rounding of a differently grouped sum only. A replay that drew
  // other dropout masks, or kept a failed attempt's gradients, would be far away.
  CHECK(relative_error(faulty.parameters, clean.parameters) < 1e-5);
}

TEST_CASE("a replayed step without BatchNorm gives the parameters of the clean run", "[recovery][trainer]") {
  const int batch = 32, steps = 20;
  SyntheticData data(batch * steps, kImage, 4, 5);
  CpuBackend backend(2);
  auto run = [&](bool inject) {
    StepBufferStack buffers(memory::host_resource());
    if (inject) buffers.faults().fail_on({3, 70, 200, 333, 500, 610});
    Network net = small_with_dropout();
    TrainerOptions o = constant_sgd(batch);
    Trainer trainer(net, backend, buffers.stack(), o);
    for (int s = 0; s < steps; ++s) trainer.train_step(data.batch(s * batch, batch));
    return trainer.parameters().download();
  };
  const auto clean = run(false), faulty = run(true);
  CHECK(relative_error(faulty, clean) < 1e-5);  // float rounding of a different grouping of the same sum
}

TEST_CASE("an out-of-memory failure during evaluation replays that batch at a smaller micro-batch",
          "[recovery][trainer]") {
  CpuBackend backend(2);
  StepBufferStack buffers(memory::host_resource());
  memory::FaultInjectionAdaptor& faults = buffers.faults();
  Network net = small_with_dropout();
  TrainerOptions o = constant_sgd(16);
  SyntheticData data(16 * 8, kImage, 4, 9);
  {
    Trainer trainer(net, backend, buffers.stack(), o);
    int recoveries = 0;
    trainer.on_recovery = [&](const std::string& message) {
      ++recoveries;
      CHECK(message.find("evaluation batch 3") != std::string::npos);
    };
    for (int s = 0; s < 4; ++s) trainer.train_step(data.batch(s * 16, 16));
    auto batches = [&] {
      return [&, next = 4]() mutable -> std::optional<Batch> {
        if (next == 8) return std::nullopt;
        return data.batch(16 * next++, 16);
      };
    };
    const std::uint64_t before = faults.requests_seen();
    const EvalResult clean = trainer.evaluate(batches());
    // Fail a request of the third batch: it is run again at micro-batch 8, and counted once.
    const std::uint64_t per_batch = (faults.requests_seen() - before) / 4;  // 4 batches alike
    faults.fail_on({faults.requests_seen() + 2 * per_batch + per_batch / 2});
    const EvalResult replayed = trainer.evaluate(batches());
    CHECK(faults.injected_failures() == 1);
    CHECK(recoveries == 1);
    CHECK(trainer.micro_batch() == 8);
    CHECK(replayed.samples == clean.samples);
    CHECK(replayed.accuracy == clean.accuracy);
    CHECK(replayed.loss == Approx(clean.loss).epsilon(1e-5));
  }
  CHECK(buffers.step_buffers().current_bytes == 0);
}

TEST_CASE("at micro-batch 1 an out-of-memory failure stops with the byte table", "[recovery][trainer]") {
  StepBufferStack buffers(memory::host_resource());
  Network net = make_preset("small", kImage, 4);
  TrainerOptions o = constant_sgd(4);
  CpuBackend backend(1);
  Trainer trainer(net, backend, buffers.stack(), o);
  SyntheticData data(4, kImage, 4, 1);
  buffers.faults().fail_randomly(1.0, 1);
  try {
    trainer.train_step(data.batch(0, 4));
    FAIL("no error");
  } catch (const memory::OutOfMemory& e) {
    CHECK(std::string(e.what()).find("micro-batch 1") != std::string::npos);
    CHECK(std::string(e.what()).find("step arena") != std::string::npos);
  }
}

TEST_CASE("a sweep of budgets: each run trains within its budget or is refused before step 1", "[budget][trainer]") {
  CpuBackend backend(2);
  check_budget_sweep(backend, memory::host_resource(), std::size_t{64} << 20);
}

TEST_CASE("a trainer whose arena cannot be had halves it, and leaves nothing behind when none can be had",
          "[recovery][trainer]") {
  memory::StatisticsAdaptor stats(memory::host_resource());
  memory::FaultInjectionAdaptor faults(stats);
  CpuBackend backend(1);
  Network net = make_preset("small", kImage, 4);
  TrainerOptions o;
  o.batch = 64;
  faults.fail_on({4});  // parameters, gradients, optimizer state, metrics, then the arena
  {
    Trainer trainer(net, backend, faults, o);
    CHECK(trainer.micro_batch() == 32);
    SyntheticData data(64, kImage, 4, 3);
    CHECK(trainer.train_step(data.batch(0, 64)).samples == 64);
  }
  CHECK(stats.statistics().current_bytes == 0);

  // Every arena, 64 down to 1, refused (requests are counted on from the first trainer's).
  const std::uint64_t first = faults.requests_seen() + 4;
  faults.fail_on({first, first + 1, first + 2, first + 3, first + 4, first + 5, first + 6});
  CHECK_THROWS_WITH(Trainer(net, backend, faults, o),
                    Catch::Contains("even at micro-batch 1") && Catch::Contains("step arena"));
  CHECK(faults.injected_failures() == 8);
  CHECK(stats.statistics().current_bytes == 0);
}

namespace {
// Throws OutOfMemory from its forward pass a chosen number of times, like a library that asks
// for memory of its own.
class FailingLayer final : public Layer {
 public:
  explicit FailingLayer(int failures) : failures_(failures) {}
  std::string type_name() const override { return "failing"; }
  std::string describe() const override { return "failing"; }
  Shape output_shape(const std::vector<Shape>& inputs) override { return inputs.at(0); }
  void forward(const LayerContext& c) override {
    if (failures_ > 0 && c.training) {
      --failures_;
      throw memory::OutOfMemory(memory::OutOfMemoryDetails{});
    }
    c.backend->copy_or_add(c.inputs[0], c.output, false);
  }
  void backward(const LayerContext& c) override {
    if (wants_gradient(c, 0)) c.backend->copy_or_add(c.grad_output, c.grad_inputs[0], c.accumulate[0]);
  }

 private:
  int failures_;
};
}  // namespace

TEST_CASE("a recovery whose smaller arena cannot be had either keeps halving, and never leaves a broken trainer",
          "[recovery][trainer]") {
  memory::StatisticsAdaptor stats(memory::host_resource());
  memory::FaultInjectionAdaptor faults(stats);
  CpuBackend backend(1);
  Network net(kImage);
  net.emplace<Conv2D>(4, 3, 1, 1);
  net.add(std::make_unique<FailingLayer>(1));
  net.emplace<Flatten>();
  net.emplace<Dense>(4);
  TrainerOptions o = constant_sgd(16);
  SyntheticData data(16 * 4, kImage, 4, 2);
  {
    Trainer trainer(net, backend, faults, o);
    faults.fail_next(1);  // the arena for micro-batch 8 fails: the engine goes on to 4
    const StepReport r = trainer.train_step(data.batch(0, 16));
    CHECK(r.samples == 16);
    CHECK(trainer.micro_batch() == 4);
    CHECK(trainer.train_step(data.batch(16, 16)).samples == 16);
  }
  CHECK(stats.statistics().current_bytes == 0);
}

TEST_CASE("a step that fails for another reason leaves parameters, state and memory as they were",
          "[recovery][trainer]") {
  StepBufferStack buffers(memory::host_resource());
  CpuBackend backend(1);
  Network net = make_preset("small-bn", kImage, 4);
  TrainerOptions o = constant_sgd(8);
  o.micro_batch = 4;
  {
    Trainer trainer(net, backend, buffers.stack(), o);
    SyntheticData data(16, kImage, 4, 6);
    trainer.train_step(data.batch(0, 8));
    const auto before = trainer.parameters().download();
    data.labels[8 + 5] = 99;  // in the second micro-batch
    CHECK_THROWS_WITH(trainer.train_step(data.batch(8, 8)), Catch::Contains("label 99 of sample 5"));
    CHECK(trainer.parameters().download() == before);
    CHECK(buffers.step_buffers().current_bytes == 0);
    data.labels[8 + 5] = 1;
    CHECK(trainer.train_step(data.batch(8, 8)).samples == 8);
  }
  CHECK(buffers.step_buffers().current_bytes == 0);
}
