// Recomputation on the GPU (docs/design.md, "Recomputation"): 20 steps recomputing give the
// parameters of keeping within 1e-5 (cuDNN's BatchNorm and the recomputation's own kernel round
// differently, and cuDNN's reductions are not deterministic), recorded as CUDA graphs too, and a
// step recomputing allocates nothing.
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "engine/train/planning_options.hpp"
#include "engine/train/trainer.hpp"
#include "memory/statistics_adaptor.hpp"
#include "models/network_text.hpp"
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
  o.memory.budget = budget;
  o.capture_graphs = graphs;
  return o;
}

// The fewest bytes the planner reaches recomputing, at micro-batch 8, on the backend that trains
// (another's algorithms need other workspaces).
std::size_t smallest_with_recomputation(const std::string& name, Backend& gpu) {
  Network net = make_model(name);
  const BatchPlanner planner(net, gpu, planning_options(options(RecomputePolicy::automatic, 1, false), net, gpu));
  return planner.breakdown(8).total();
}

struct Trained {
  std::vector<float> parameters;
  int recomputed_layers = 0;
  long replays = 0;
};

Trained train(const std::string& name, const TrainerOptions& o) {
  Backend& gpu = cuda_test::gpu_deterministic();
  Network net = make_model(name);
  Trainer trainer(net, gpu, gpu.device_memory(), o);
  const SyntheticData data(16 * 20, kImage, 4, 13);
  for (int s = 0; s < 20; ++s) trainer.train_step(data.batch(16 * s, 16));
  return {trainer.parameters().download(), trainer.memory().recomputed_layers, trainer.graph_replays()};
}

}  // namespace

TEST_CASE("on the GPU recomputing trains as keeping, within 1e-5", "[cuda][recompute]") {
  for (const std::string name : {"small-bn", "resnet", "resnet18+dropout"}) {
    for (bool graphs : {false, true}) {
      INFO(name << (graphs ? ", as CUDA graphs" : ""));
      const Trained kept = train(name, options(RecomputePolicy::none, 0, graphs));
      const Trained cheap = train(name, options(RecomputePolicy::cheap, 0, graphs));
      const std::size_t smallest = smallest_with_recomputation(name, cuda_test::gpu_deterministic());
      const Trained most = train(name, options(RecomputePolicy::automatic, smallest, graphs));
      CHECK(cheap.recomputed_layers > 0);
      CHECK(most.recomputed_layers > cheap.recomputed_layers);
      CHECK(relative_error(cheap.parameters, kept.parameters) < 1e-5);
      CHECK(relative_error(most.parameters, kept.parameters) < 1e-5);
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

namespace {

// Each node's parameter gradients after one step, downloaded.
std::vector<std::vector<float>> gradients_by_node(Trainer& trainer, Backend& gpu, const Network& net) {
  std::vector<std::vector<float>> out(static_cast<std::size_t>(net.size()));
  gpu.synchronize();
  for (int id = 1; id < net.size(); ++id)
    for (const Tensor& g : trainer.parameters().grads(id)) {
      if (!g.data || g.elements() == 0) continue;  // running statistics have no gradient
      std::vector<float> host(g.elements());
      gpu.copy_to_host(g.data, host.data(), g.bytes());
      out[static_cast<std::size_t>(id)].insert(out[static_cast<std::size_t>(id)].end(), host.begin(), host.end());
    }
  gpu.synchronize();
  return out;
}

}  // namespace

// Not a check: where a recomputing GPU run first parts from keeping. For resnet18 at 8x8, steps
// 1 to 8: how far the parameters and the loss are from keeping, for a second keeping run (the
// control) and for recomputing; at the first step where recomputing differs, each layer whose
// parameter gradients differ (backward order: the first printed is where it starts).
TEST_CASE("where recomputing parts from keeping on the GPU", "[.][cuda][recompute-diagnose]") {
  for (const RecomputePolicy policy : {RecomputePolicy::cheap, RecomputePolicy::automatic}) {
    Backend& gpu = cuda_test::gpu_deterministic();
    auto build = [&] { return make_preset("resnet18", kImage, 4); };
    Network kept_net = build(), control_net = build(), recomputing_net = build();
    TrainerOptions recomputing = options(policy, 0, false);
    if (policy == RecomputePolicy::automatic) {
      const BatchPlanner planner(recomputing_net, gpu, planning_options(options(policy, 1, false), recomputing_net, gpu));
      recomputing.memory.budget = planner.breakdown(8).total();
    }
    Trainer kept(kept_net, gpu, gpu.device_memory(), options(RecomputePolicy::none, 0, false));
    Trainer control(control_net, gpu, gpu.device_memory(), options(RecomputePolicy::none, 0, false));
    Trainer recomputed(recomputing_net, gpu, gpu.device_memory(), recomputing);
    std::printf("== resnet18 8x8, %s: %d layers recomputed\n", policy == RecomputePolicy::cheap ? "cheap" : "auto",
                recomputed.memory().recomputed_layers);
    const SyntheticData data(16 * 8, kImage, 4, 13);
    bool printed = false;
    for (int s = 0; s < 8; ++s) {
      const double a = kept.train_step(data.batch(16 * s, 16)).loss;
      const double b = control.train_step(data.batch(16 * s, 16)).loss;
      const double c = recomputed.train_step(data.batch(16 * s, 16)).loss;
      const auto k = kept.parameters().download();
      const double recomputing_apart = relative_error(recomputed.parameters().download(), k);
      std::printf("  step %d: loss %.9g, control %+.3g, recomputing %+.3g; parameters: control %.3g, recomputing %.3g\n",
                  s + 1, a, b - a, c - a, relative_error(control.parameters().download(), k), recomputing_apart);
      if (recomputing_apart > 0 && !std::exchange(printed, true)) {
        const auto ga = gradients_by_node(kept, gpu, kept_net), gb = gradients_by_node(recomputed, gpu, recomputing_net);
        int lines = 0;
        for (int id = kept_net.size() - 1; id >= 1 && lines < 24; --id) {
          const auto& g = ga[static_cast<std::size_t>(id)];
          if (g.empty()) continue;
          const double e = relative_error(gb[static_cast<std::size_t>(id)], g);
          if (e > 0) {
            std::printf("    node %d (%s): gradients %.3g apart\n", id, kept_net.node(id).layer->type_name().c_str(), e);
            ++lines;
          }
        }
      }
    }
  }
}
