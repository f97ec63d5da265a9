// Recomputation on the GPU (docs/design.md, "Recomputation"): recomputing gives the parameters of
// keeping within 1e-5, recorded as CUDA graphs too, and a step recomputing allocates nothing.
//
// Not to the bit: cuDNN's BatchNorm and the recomputation's own kernel round differently, and a
// recomputed convolution may run another algorithm. How far apart that leaves the runs depends on
// the network: BatchNorm over few values a channel amplifies a rounding difference by orders of
// magnitude within a few steps. Measured on an H100 with deterministic algorithms (resnet18 at 8x8
// without dropout, BatchNorm over 8 values a channel in its last stage): a second keeping run gave
// the same bits at every step; recomputing gave them in step 1 (gamma 1 and beta 0 round alike)
// and parted in step 2, where the convolutions' gradients were 1e-7 apart (the recomputed ReLU
// input an ulp off); the parameters were 1e-8 apart after 2 steps, 5e-4 after 5 and 0.5 to 1 after
// 20. With dropout, `auto` was 1.9e-4 apart after 2 steps. On the CPU, nudging every recomputed
// value by one ulp moves resnet18's parameters by 1e-8 to 4e-4 after one step and up to 9e-3 after
// two. `resnet` at 8x8 normalises 32 values a channel in its last stage: on an H200, with the
// weights starting as PyTorch's, cheap recomputation was 1.3e-3 from keeping after 20 steps. So
// the resnets are compared after their first steps, where a recomputation that read a wrong buffer
// or drew another mask would still be far off, and small-bn after 20; a failure shows every
// step's distance.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "engine/train/planning_options.hpp"
#include <cnnengine/engine/train/trainer.hpp>
#include "memory/statistics_adaptor.hpp"
#include <cnnengine/models/network_text.hpp>
#include "support.hpp"
#include "tests/engine/test_networks.hpp"
#include "tests/relative_error.hpp"

using namespace cnn;
using cnn::testing::relative_error;
using cnn::testing::SyntheticData;

namespace {

const Shape kImage{1, 8, 8};

Network make_model(const std::string& name) {
  return name == "resnet18+dropout" ? testing::resnet18_with_dropout(kImage, 4) : make_preset(name, kImage, 4);
}

TrainerOptions options(RecomputePolicy policy, std::size_t budget, bool graphs) {
  TrainerOptions o = testing::constant_sgd(16);
  o.micro_batch = 8;
  o.seed = 5;
  o.recompute = policy;
  o.memory_budget = budget;
  o.capture_graphs = graphs ? GraphCapture::always : GraphCapture::never;
  return o;
}

// The fewest bytes the planner reaches recomputing, at micro-batch 8, on the backend that trains
// (another's algorithms need other workspaces).
std::size_t smallest_with_recomputation(const std::string& name, Backend& gpu) {
  Network net = make_model(name);
  const BatchPlanner planner(net, gpu, planning_options(options(RecomputePolicy::automatic, 1, false), net, gpu));
  return planner.breakdown(8).total();
}

// The parameters after each step.
struct Trained {
  std::vector<std::vector<float>> parameters;
  int recomputed_layers = 0;
  long replays = 0;
};

Trained train(const std::string& name, int steps, const TrainerOptions& o) {
  Backend& gpu = cuda_test::gpu_deterministic();
  Network net = make_model(name);
  Trainer trainer(net, gpu, gpu.device_memory(), o);
  const SyntheticData data(16 * steps, kImage, 4, 13);
  Trained out;
  for (int s = 0; s < steps; ++s) {
    trainer.train_step(data.batch(16 * s, 16));
    out.parameters.push_back(trainer.parameters().download());
  }
  out.recomputed_layers = trainer.memory().recomputed_layers;
  out.replays = trainer.graph_replays();
  return out;
}

// Each step's relative distance between two runs' parameters.
std::vector<double> distances(const Trained& a, const Trained& b) {
  std::vector<double> out;
  for (std::size_t s = 0; s < a.parameters.size() && s < b.parameters.size(); ++s)
    out.push_back(relative_error(a.parameters[s], b.parameters[s]));
  return out;
}

std::string listed(const std::vector<double>& values) {
  std::ostringstream text;
  for (std::size_t s = 0; s < values.size(); ++s) text << (s ? ", " : "") << s + 1 << ": " << values[s];
  return text.str();
}

}  // namespace

TEST_CASE("on the GPU recomputing trains as keeping, within 1e-5", "[cuda][recompute]") {
  struct Case {
    std::string name;
    int steps;  // the resnets' rounding grows too fast for more (the opening comment)
  };
  for (const Case& c : {Case{"small-bn", 20}, Case{"resnet", 3}, Case{"resnet18+dropout", 1}}) {
    const std::string& name = c.name;
    for (bool graphs : {false, true}) {
      INFO(name << (graphs ? ", as CUDA graphs" : ""));
      const Trained kept = train(name, c.steps, options(RecomputePolicy::none, 0, graphs));
      const Trained cheap = train(name, c.steps, options(RecomputePolicy::cheap, 0, graphs));
      const std::size_t smallest = smallest_with_recomputation(name, cuda_test::gpu_deterministic());
      const Trained most = train(name, c.steps, options(RecomputePolicy::automatic, smallest, graphs));
      CHECK(cheap.recomputed_layers > 0);
      CHECK(most.recomputed_layers > cheap.recomputed_layers);
      const std::vector<double> cheap_apart = distances(cheap, kept), most_apart = distances(most, kept);
      INFO("cheap's distance from keeping after each step: " << listed(cheap_apart));
      INFO("auto's: " << listed(most_apart));
      CHECK(cheap_apart.back() < 1e-5);
      CHECK(most_apart.back() < 1e-5);
      if (graphs) CHECK(most.replays > 0);
    }
  }
}

TEST_CASE("a GPU step recomputing allocates nothing", "[cuda][recompute]") {
  Backend& gpu = cuda_test::gpu();
  memory::StatisticsAdaptor stats(gpu.device_memory());
  Network net = make_model("resnet");
  Trainer trainer(net, gpu, stats, options(RecomputePolicy::automatic, smallest_with_recomputation("resnet", gpu), false));
  REQUIRE(trainer.memory().recomputed_layers > 0);
  SyntheticData data(16 * 4, kImage, 4, 3);
  trainer.train_step(data.batch(0, 16));
  gpu.synchronize();
  const auto before = stats.statistics();
  for (int s = 1; s < 4; ++s) trainer.train_step(data.batch(s * 16, 16));
  gpu.synchronize();
  CHECK(stats.statistics().allocations == before.allocations);
}
