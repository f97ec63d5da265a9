// Steps submitted without waiting (Trainer::submit_step) on a backend whose copies overlap its
// compute, as CUDA's do: a CPU backend that says so and records every call that could block the
// host. On the normal path a step makes none; each micro-batch is one packed copy; the reports
// come one step late and in order; the losses and parameters are train_step's on the plain CPU,
// to the bit; a NaN loss read one step late still leaves the parameters as they were before it.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "engine/core/detail/input_stager.hpp"
#include "engine/train/planning_options.hpp"
#include <cnnengine/engine/train/trainer.hpp>
#include "memory/host_resource.hpp"
#include <cnnengine/models/network_text.hpp>
#include "tests/engine/test_networks.hpp"

using namespace cnn;
using cnn::testing::SyntheticData;

namespace {

const Shape kImage{1, 12, 12};

// The CPU's kernels; copies "overlap" compute. Copies take effect at once, but with
// `slow_device` a fence is reached only once waited for, as a device always behind would be.
class OverlappingBackend final : public CpuBackend {
 public:
  explicit OverlappingBackend(bool slow_device = false) : CpuBackend(1), slow_(slow_device) {}
  bool copies_overlap_compute() const override { return true; }

  Fence copy_to_device_async(const void* host, void* device, std::size_t bytes) override {
    ++packed_copies;
    CpuBackend::copy_to_device(host, device, bytes);
    return Fence{++fences_};
  }
  Fence copy_to_host_async(const void* device, void* host, std::size_t bytes) override {
    CpuBackend::copy_to_host(device, host, bytes);
    return Fence{++fences_};
  }
  bool reached(Fence fence) override { return !slow_ || fence.id <= waited_up_to_; }
  void wait(Fence fence) override {
    ++blocking_calls;
    ++waits;
    waited_up_to_ = std::max(waited_up_to_, fence.id);
  }
  void synchronize() override { ++blocking_calls; }
  void copy_to_host(const void* device, void* host, std::size_t bytes) override {
    ++blocking_calls;
    CpuBackend::copy_to_host(device, host, bytes);
  }
  void copy_to_device(const void* host, void* device, std::size_t bytes) override {
    ++blocking_calls;  // returns once the copy is done: a wait on a real device
    CpuBackend::copy_to_device(host, device, bytes);
  }

  long blocking_calls = 0, waits = 0, packed_copies = 0;

 private:
  bool slow_;
  std::uint64_t fences_ = 0, waited_up_to_ = 0;
};

TrainerOptions options(int micro_batch = 0) {
  TrainerOptions o;
  o.batch = 8;
  o.micro_batch = micro_batch;
  o.optimizer.kind = OptimizerKind::adamw;
  return o;
}

struct Run {
  std::vector<double> losses;
  std::vector<long> steps;
  std::vector<float> parameters;
};

Run with_train_step(const std::string& model, int micro_batch, const SyntheticData& data, int steps) {
  CpuBackend backend(1);
  Network net = make_preset(model, kImage, 4);
  Trainer trainer(net, backend, memory::host_resource(), options(micro_batch));
  Run run;
  for (int s = 0; s < steps; ++s) run.losses.push_back(trainer.train_step(data.batch(8 * s, 8)).loss);
  run.parameters = trainer.parameters().download();
  return run;
}

}  // namespace

TEST_CASE("submitted steps on a backend that overlaps copies wait for nothing and train as train_step",
          "[trainer][overlap]") {
  const SyntheticData data(8 * 10, kImage, 4, 7);
  for (const char* model : {"small", "small-bn"}) {
    for (int micro_batch : {0, 3}) {  // 1 x 8; 3 + 3 + 2
      INFO(model << ", micro-batch " << micro_batch);
      OverlappingBackend backend;
      Network net = make_preset(model, kImage, 4);
      Trainer trainer(net, backend, memory::host_resource(), options(micro_batch));
      const long packed_before = backend.packed_copies;
      Run run;
      for (int s = 0; s < 10; ++s) {
        const long blocking_before = backend.blocking_calls;
        const std::optional<StepReport> earlier = trainer.submit_step(data.batch(8 * s, 8));
        CHECK(backend.blocking_calls == blocking_before);  // nothing waited for the device
        CHECK(trainer.step_pending());
        CHECK(earlier.has_value() == (s > 0));  // one step late, in order
        if (earlier) {
          CHECK(earlier->step == s);
          CHECK(earlier->host_waits == 0);
          run.losses.push_back(earlier->loss);
        }
      }
      const std::optional<StepReport> last = trainer.drain();
      REQUIRE(last);
      CHECK(last->step == 10);
      run.losses.push_back(last->loss);
      CHECK_FALSE(trainer.drain());
      CHECK(backend.packed_copies - packed_before == 10 * last->micro_batches);  // one copy per micro-batch
      run.parameters = trainer.parameters().download();

      const Run reference = with_train_step(model, micro_batch, data, 10);
      CHECK(run.losses == reference.losses);
      CHECK(run.parameters == reference.parameters);
      trainer.finish();  // every byte given back, the staged input's too
      CHECK(trainer.memory_stack().statistics().current_bytes == 0);
      CHECK(trainer.memory_stack().staging_statistics().current_bytes == 0);
    }
  }
}

TEST_CASE("a device that lags makes the host wait only for a staging buffer or a loss, each counted",
          "[trainer][overlap]") {
  OverlappingBackend backend(/*slow_device=*/true);
  Network net = make_preset("small-bn", kImage, 4);
  Trainer trainer(net, backend, memory::host_resource(), options(3));
  const SyntheticData data(8 * 6, kImage, 4, 7);
  long reported = 0;
  const long blocking_before = backend.blocking_calls, waits_before = backend.waits;
  for (int s = 0; s < 6; ++s)
    if (const auto r = trainer.submit_step(data.batch(8 * s, 8))) reported += r->host_waits;
  reported += trainer.drain()->host_waits;
  CHECK(reported > 0);
  CHECK(reported == backend.waits - waits_before);
  CHECK(backend.blocking_calls - blocking_before == backend.waits - waits_before);  // never a whole-device wait
}

TEST_CASE("a NaN loss read one step late leaves the parameters as they were before its step",
          "[trainer][overlap][diverged]") {
  const std::string text = testing::kOverflowingNetwork;
  OverlappingBackend backend;
  CpuBackend cpu(1);
  Network clean_net = parse_network(text, kImage, 4), tested_net = parse_network(text, kImage, 4);
  Trainer clean(clean_net, cpu, memory::host_resource(), options());
  Trainer tested(tested_net, backend, memory::host_resource(), options());
  testing::fill_parameter(clean, clean_net, 1, "weight", 1.0f);
  testing::fill_parameter(tested, tested_net, 1, "weight", 1.0f);
  SyntheticData data(24, kImage, 4, 3);
  SyntheticData poisoned = data;
  std::fill_n(poisoned.images.begin() + 8 * kImage.elements(), kImage.elements(), std::numeric_limits<float>::max());

  clean.train_step(data.batch(0, 8));
  CHECK_FALSE(tested.submit_step(data.batch(0, 8)));
  CHECK(tested.submit_step(poisoned.batch(8, 8))->step == 1);  // step 2 enqueued, its loss unread
  try {
    tested.submit_step(data.batch(16, 8));  // reads step 2's loss before enqueueing step 3's update
    FAIL("a NaN loss was accepted");
  } catch (const TrainingDiverged& e) {
    CHECK(e.step() == 2);
    CHECK(std::isnan(e.loss()));
  }
  CHECK_FALSE(tested.step_pending());
  CHECK(tested.steps() == 1);
  CHECK(tested.parameters().download() == clean.parameters().download());  // running statistics too

  // The optimizer state is untouched: the next step is the clean run's next step.
  const double clean_loss = clean.train_step(data.batch(16, 8)).loss;
  CHECK_FALSE(tested.submit_step(data.batch(16, 8)));
  CHECK(tested.drain()->loss == clean_loss);
  CHECK(tested.parameters().download() == clean.parameters().download());
}

TEST_CASE("a pending step must be drained before the trainer's state is read or train_step runs",
          "[trainer][overlap]") {
  OverlappingBackend backend;
  Network net = make_preset("small", kImage, 4);
  Trainer trainer(net, backend, memory::host_resource(), options());
  const SyntheticData data(16, kImage, 4, 7);
  trainer.submit_step(data.batch(0, 8));
  CHECK_THROWS_WITH(trainer.state(), Catch::Contains("step 1 is pending") && Catch::Contains("drain()"));
  CHECK_THROWS_WITH(trainer.train_step(data.batch(8, 8)), Catch::Contains("drain() it first"));
  const EvalResult e = trainer.evaluate([&, done = false]() mutable -> std::optional<Batch> {
    if (done) return std::nullopt;
    done = true;
    return data.batch(8, 8);
  });
  CHECK(e.samples == 8);
  CHECK(trainer.drain()->step == 1);  // the evaluation read its loss, the report waited
  CHECK(trainer.state().steps == 1);
}

TEST_CASE("the plan counts the input copied ahead and the second copy of the state where copies overlap",
          "[trainer][overlap][plan]") {
  OverlappingBackend overlapping;
  CpuBackend cpu(1);
  Network a = make_preset("small-bn", kImage, 4), b = make_preset("small-bn", kImage, 4);
  const BatchPlanner on_overlapping(a, overlapping, planning_options(options(), a, overlapping));
  const BatchPlanner on_cpu(b, cpu, planning_options(options(), b, cpu));
  const MemoryBreakdown over = on_overlapping.breakdown(8), plain = on_cpu.breakdown(8);
  CHECK(plain.input_staging == 0);
  CHECK(over.input_staging == InputStager::bytes_for(overlapping, kImage.elements(), sizeof(std::int32_t), 8));
  CHECK(over.input_staging >= 2 * (8 * kImage.elements() * sizeof(float) + 8 * sizeof(std::int32_t)));
  // The running statistics' second copy: the parameter block grows by them, nothing else does.
  const std::size_t parameters = plain.persistent[memory::Category::parameters];
  CHECK(over.persistent[memory::Category::parameters] > parameters);
  CHECK(over.total() == plain.total() + over.input_staging + (over.persistent[memory::Category::parameters] - parameters));
  // The trainer reserves what the plan says.
  Network c = make_preset("small-bn", kImage, 4);
  TrainerOptions o = options();
  o.memory_budget = over.total();
  Trainer trainer(c, overlapping, o);
  CHECK(trainer.memory().input_staging == over.input_staging);
}

TEST_CASE("a batch in the backend's memory trains as the same batch from the host", "[trainer][overlap]") {
  // The CPU's device memory is the host's: the same values, read through the other path.
  const SyntheticData data(8 * 4, kImage, 4, 7);
  const Run reference = with_train_step("small-bn", 3, data, 4);
  for (const bool overlapping : {false, true}) {
    INFO((overlapping ? "copies overlap compute" : "plain CPU"));
    OverlappingBackend overlapping_backend;
    CpuBackend plain(1);
    Backend& backend = overlapping ? static_cast<Backend&>(overlapping_backend) : plain;
    Network net = make_preset("small-bn", kImage, 4);
    Trainer trainer(net, backend, memory::host_resource(), options(3));
    std::vector<double> losses;
    for (int s = 0; s < 4; ++s) {
      Batch batch = data.batch(8 * s, 8);
      batch.on_device = true;
      losses.push_back(trainer.train_step(batch).loss);
    }
    CHECK(losses == reference.losses);
    CHECK(trainer.parameters().download() == reference.parameters);
    Batch device_batch = data.batch(0, 8);
    device_batch.on_device = true;
    CHECK_THROWS_WITH(trainer.evaluate([&, done = false]() mutable -> std::optional<Batch> {
      if (done) return std::nullopt;
      done = true;
      return device_batch;
    }),
                      Catch::Contains("trains only"));
  }
}
