// Recorded steps (TrainerOptions::capture_graphs) on a CPU backend that records as CUDA graphs
// do: the same losses, parameters and evaluation as the eager run, to the bit, with dropout,
// BatchNorm, accumulation, a smaller last micro-batch and a batch of another size.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "engine/train/planning_options.hpp"
#include "memory/host_resource.hpp"
#include <cnnengine/models/network_text.hpp>
#include "tests/engine/recording_backend.hpp"
#include "tests/engine/test_networks.hpp"

using namespace cnn;
using cnn::testing::RecordingBackend;
using cnn::testing::SyntheticData;

namespace {

const Shape kImage{1, 12, 12};
constexpr int kClasses = 4;

struct Run {
  std::vector<double> losses;
  std::vector<float> parameters;
  double test_loss = 0;
  long replays = 0;
  std::vector<std::string> log;
};

// Steps of `batches[i]` samples each (the last one an epoch's last, which may be smaller), then an
// evaluation of 40 samples in batches of 16.
Run train(const std::string& model, TrainerOptions options, const std::vector<int>& batches,
          int fail_capture_at_call = 0) {
  RecordingBackend backend(2);
  backend.fail_next_capture_at(fail_capture_at_call);
  // A preset's name, or a network text (it has a newline).
  Network net = model.find('\n') == std::string::npos ? make_preset(model, kImage, kClasses)
                                                       : parse_network(model, kImage, kClasses);
  Trainer trainer(net, backend, memory::host_resource(), options);
  Run run;
  trainer.on_recovery = [&](const std::string& line) { run.log.push_back(line); };
  SyntheticData data(200, kImage, kClasses, 3);
  int first = 0;
  for (std::size_t i = 0; i < batches.size(); ++i) {
    Batch batch = data.batch(first, batches[i]);
    batch.last_of_epoch = i + 1 == batches.size();
    run.losses.push_back(trainer.train_step(batch).loss);
    first += batches[i];
  }
  int next = 0;
  run.test_loss = trainer
                      .evaluate([&]() -> std::optional<Batch> {
                        if (next >= 40) return std::nullopt;
                        const int size = std::min(16, 40 - next);
                        next += size;
                        return data.batch(next - size, size);
                      })
                      .loss;
  run.parameters = trainer.parameters().download();
  run.replays = trainer.graph_replays();
  return run;
}

TrainerOptions options(int batch, bool capture) {
  TrainerOptions o;
  o.batch = batch;
  o.seed = 9;
  o.schedule.kind = ScheduleKind::constant;  // cosine without total_steps would stop learning after step 1
  o.capture_graphs = capture ? GraphCapture::always : GraphCapture::never;
  return o;
}

}  // namespace

TEST_CASE("recorded steps give the eager run's losses, parameters and evaluation", "[trainer][graphs]") {
  // The last step's batch is smaller: another micro-batch size, another gradient scale.
  const std::vector<int> batches{16, 16, 16, 16, 10};
  // The last model: BatchNorm on the input (a discarded input gradient) and after a dense layer
  // (two samples or more), so at micro-batch 5 a step of 16 runs 5 + 5 + 4 + 2.
  const std::string bn_text = "batchnorm\nconv 4 3 pad=1\nrelu\nflatten\ndense 16\nbatchnorm\nrelu\ndense 4\n";
  for (const std::string model : {"small", "small-bn", "resnet", bn_text.c_str()}) {
    for (int micro_batch : {0, model == bn_text ? 5 : 6}) {  // one micro-batch a step; 6 + 6 + 4
      INFO(model << ", micro-batch " << micro_batch);
      TrainerOptions eager = options(16, false), recorded = options(16, true);
      eager.micro_batch = recorded.micro_batch = micro_batch;
      const Run a = train(model, eager, batches), b = train(model, recorded, batches);
      CHECK(b.losses == a.losses);
      CHECK(b.parameters == a.parameters);
      CHECK(b.test_loss == a.test_loss);
      CHECK(a.replays == 0);
      CHECK(b.replays > 0);
      CHECK(b.log.empty());
    }
  }
}

TEST_CASE("recorded steps that recompute give the eager run's results, recomputations recorded too",
          "[trainer][graphs][recompute]") {
  const std::vector<int> batches{16, 16, 16, 10};
  for (const std::string model : {"small-bn", "resnet"}) {
    // The least bytes recomputation reaches at micro-batch 6, as a budget: convolutions recomputed.
    TrainerOptions probe = options(16, false);
    probe.micro_batch = 6;
    probe.recompute = RecomputePolicy::automatic;
    probe.memory_budget = 1;
    Network net = make_preset(model, kImage, kClasses);
    RecordingBackend backend(2);
    const std::size_t smallest = BatchPlanner(net, backend, planning_options(probe, net, backend)).breakdown(6).total();
    for (const RecomputePolicy policy : {RecomputePolicy::cheap, RecomputePolicy::automatic}) {
      INFO(model << ", " << to_string(policy));
      TrainerOptions eager = options(16, false), recorded = options(16, true);
      for (TrainerOptions* o : {&eager, &recorded}) {
        o->micro_batch = 6;
        o->recompute = policy;
        if (policy == RecomputePolicy::automatic) o->memory_budget = smallest;
      }
      const Run a = train(model, eager, batches), b = train(model, recorded, batches);
      CHECK(b.losses == a.losses);
      CHECK(b.parameters == a.parameters);
      CHECK(b.test_loss == a.test_loss);
      CHECK(b.replays > 0);
      CHECK(b.log.empty());
      // And as keeping: the recomputations replayed are the forward's kernels on forward's inputs.
      TrainerOptions kept = options(16, true);
      kept.micro_batch = 6;
      CHECK(train(model, kept, batches).parameters == b.parameters);
    }
  }
}

TEST_CASE("a failed capture is logged and the run goes on without graphs, unchanged", "[trainer][graphs]") {
  const std::vector<int> batches{16, 16, 16};
  const Run eager = train("small-bn", options(16, false), batches);
  const Run failed = train("small-bn", options(16, true), batches, /*fail_capture_at_call*/ 3);
  CHECK(failed.losses == eager.losses);
  CHECK(failed.parameters == eager.parameters);
  CHECK(failed.replays == 0);
  REQUIRE(failed.log.size() == 1);
  CHECK_THAT(failed.log[0], Catch::Contains("recording the step as a graph failed") &&
                                Catch::Contains("cannot be captured (injected)") &&
                                Catch::Contains("running without graphs"));
}

TEST_CASE("recording steps is refused where it cannot work", "[trainer][graphs]") {
  Network net = make_preset("small", kImage, kClasses);
  CpuBackend cpu(1);
  CHECK_THROWS_WITH(Trainer(net, cpu, memory::host_resource(), options(8, true)),
                    Catch::Contains("this backend cannot capture calls"));
  RecordingBackend recording(1);
  TrainerOptions dynamic = options(8, true);
  dynamic.memory_strategy = memory::Strategy::direct;
  CHECK_THROWS_WITH(Trainer(net, recording, memory::host_resource(), dynamic),
                    Catch::Contains("needs the planned strategy"));
}

// By default (GraphCapture::automatic) a trainer records wherever it can, and says why where not.
TEST_CASE("a trainer records its steps by default where it can, and says why not elsewhere", "[trainer][graphs]") {
  Network net = make_preset("small", kImage, kClasses);
  TrainerOptions automatic = options(8, false);
  automatic.capture_graphs = GraphCapture::automatic;
  RecordingBackend recording(1);
  {
    Trainer trainer(net, recording, memory::host_resource(), automatic);
    CHECK(trainer.capturing_graphs());
    CHECK(trainer.graphs_off_because().empty());
  }
  CpuBackend cpu(1);
  {
    Trainer trainer(net, cpu, memory::host_resource(), automatic);
    CHECK_FALSE(trainer.capturing_graphs());
    CHECK_THAT(trainer.graphs_off_because(), Catch::Contains("this backend cannot capture calls"));
  }
  TrainerOptions dynamic = automatic;
  dynamic.memory_strategy = memory::Strategy::direct;
  {
    Trainer trainer(net, recording, memory::host_resource(), dynamic);
    CHECK_FALSE(trainer.capturing_graphs());
    CHECK_THAT(trainer.graphs_off_because(), Catch::Contains("needs the planned strategy"));
  }
  CHECK_THAT(graph_capture_blocked(automatic, recording), Catch::Equals(""));
  TrainerOptions never = automatic;
  never.capture_graphs = GraphCapture::never;
  Trainer trainer(net, recording, memory::host_resource(), never);
  CHECK_FALSE(trainer.capturing_graphs());
  CHECK(trainer.graphs_off_because() == "turned off");
}
