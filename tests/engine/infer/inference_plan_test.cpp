// The inference plan: forward only, so it holds no gradients, no optimizer state and nothing kept
// for backward, and its arena is what liveness requires (about the largest pair of adjacent
// activations), far below a training step's at the same micro-batch.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <set>

#include "backends/cpu/cpu_backend.hpp"
#include "engine/infer/detail/inference_plan.hpp"
#include "engine/infer/inference_planner.hpp"
#include "engine/train/planning_options.hpp"
#include <cnnengine/engine/train/trainer.hpp>
#include <cnnengine/memory/memory_resource.hpp>
#include <cnnengine/models/network_text.hpp>
#include "tests/engine/test_networks.hpp"

using namespace cnn;
using memory::Category;

namespace {

constexpr std::size_t kWorkspaceLimit = std::size_t{256} << 20;  // InferenceOptions' default

std::size_t aligned(std::size_t bytes) {
  return memory::align_up(std::max<std::size_t>(bytes, 1), memory::kDefaultAlignment);
}

// The most bytes live at once in a forward pass of b images, from the network alone: at the
// forward of node t, every output produced at or before t and read at or after t, t's workspace
// and the labels; at the loss, the logits and the labels.
std::size_t forward_liveness(Network& net, Backend& backend, int b) {
  const int last = net.last();
  const int logits = net.node(last).value;
  std::vector<int> last_read(static_cast<std::size_t>(net.size()), -1);
  for (int id = 1; id < net.size(); ++id)
    for (int in : net.node(id).inputs) {
      int& r = last_read[static_cast<std::size_t>(net.node(in).value)];
      r = std::max(r, id);
    }
  last_read[static_cast<std::size_t>(logits)] = last + 1;
  const std::size_t labels = aligned(static_cast<std::size_t>(b) * sizeof(std::int32_t));
  std::size_t most = 0;
  for (int t = 0; t <= last + 1; ++t) {
    std::size_t live = labels;
    for (int v = 0; v < net.size(); ++v)
      if (net.node(v).value == v && v <= t && t <= last_read[static_cast<std::size_t>(v)])
        live += aligned(net.node(v).shape.elements() * static_cast<std::size_t>(b) * sizeof(float));
    if (t >= 1 && t <= last && !net.node(t).layer->is_view())
      if (const std::size_t w = net.node(t).layer->workspace_bytes(backend, b, ConvPass::forward, kWorkspaceLimit))
        live += aligned(w);
    most = std::max(most, live);
  }
  return most;
}

}  // namespace

TEST_CASE("the inference plan of resnet holds no gradients nor optimizer state and less than training's",
          "[infer][plan]") {
  const Shape image{3, 32, 32};
  constexpr int kBatch = 32;
  CpuBackend backend(1);
  Network trained = make_preset("resnet", image, 10);
  TrainerOptions t = testing::constant_sgd(kBatch);
  t.optimizer.momentum = 0.9f;  // a slot of optimizer state per parameter, which inference never holds
  const BatchPlanner training(trained, backend, planning_options(t, trained, backend));
  Network net = make_preset("resnet", image, 10);
  InferenceOptions o;
  o.max_batch = kBatch;
  const InferencePlanner inference(net, backend, o);

  for (int b : {1, 8, kBatch}) {
    INFO("micro-batch " << b);
    const MemoryBreakdown train = training.breakdown(b), infer = inference.breakdown(b);
    CHECK(infer.persistent[Category::parameter_gradients] == 0);
    CHECK(infer.persistent[Category::optimizer_state] == 0);
    CHECK(train.persistent[Category::parameter_gradients] > 0);
    CHECK(train.persistent[Category::optimizer_state] > 0);
    // The parameters and their running statistics, without the copy of the statistics a trainer
    // keeps to undo a failed step.
    CHECK(infer.persistent[Category::parameters] == ParameterStore::planned_inference_bytes(net)[Category::parameters]);
    CHECK(infer.persistent[Category::parameters] <= train.persistent[Category::parameters]);
    CHECK(infer.arena_bytes < train.arena_bytes);
    CHECK(infer.arena_peak[Category::activations] < train.arena_peak[Category::activations]);
    CHECK(infer.total() < train.total());
    // Liveness, computed here from the network alone, is all the arena holds.
    CHECK(infer.lower_bound == forward_liveness(net, backend, b));
    CHECK(infer.arena_bytes == infer.lower_bound);
  }
  // Not the activations' sum: at a handful of them at once.
  const InferencePlan plan = plan_inference(inference, kBatch);
  std::size_t every_activation = 0;
  for (const memory::BufferRequest& r : plan.step.requests)
    if (r.category == Category::activations) every_activation += r.bytes;
  CHECK(plan.breakdown.arena_bytes * 4 < every_activation);
  CHECK_FALSE(plan.step.training);
  for (const memory::BufferRequest& r : plan.step.requests) {
    INFO(r.name);
    CHECK(r.name.rfind("grad", 0) == std::string::npos);
    CHECK(r.name.rfind("saved", 0) == std::string::npos);
  }
}

TEST_CASE("on a chain the inference arena is the largest pair of adjacent activations", "[infer][plan]") {
  CpuBackend backend(1);
  // One value per node: at the forward of layer t only its input, its output and its workspace
  // are live, with the labels.
  Network net =
      parse_network("flatten\ndense 300\nrelu\ndense 700\nrelu\ndense 50\nrelu\ndense 4\n", Shape{1, 8, 8}, 4);
  InferenceOptions o;
  o.max_batch = 16;
  const InferencePlanner planner(net, backend, o);
  const MemoryBreakdown m = planner.breakdown(16);
  auto out = [&](int node) { return aligned(net.node(node).shape.elements() * 16 * sizeof(float)); };
  auto workspace = [&](int node) {
    const std::size_t w = net.node(node).layer->workspace_bytes(backend, 16, ConvPass::forward, o.workspace_limit);
    return w ? aligned(w) : 0;
  };
  std::size_t pair = 0;
  for (int t = 1; t <= net.last(); ++t)
    if (!net.node(t).layer->is_view())
      pair = std::max(pair, out(net.node(net.node(t).inputs[0]).value) + out(t) + workspace(t));
  CHECK(m.arena_bytes == pair + aligned(16 * sizeof(std::int32_t)));
  CHECK(m.arena_bytes == forward_liveness(net, backend, 16));
}

TEST_CASE("an inference planner refuses what it cannot plan", "[infer][plan]") {
  CpuBackend backend(1);
  Network net = make_preset("small", Shape{1, 8, 8}, 3);
  InferenceOptions o;
  o.max_batch = 0;
  CHECK_THROWS_WITH(InferencePlanner(net, backend, o), Catch::Contains("max_batch must be positive, got 0"));
  o.max_batch = 1 << 25;
  CHECK_THROWS_WITH(InferencePlanner(net, backend, o), Catch::Contains("at most 16777216"));
  o.max_batch = 4;
  CHECK_THROWS_WITH(o.account.add_loader_staging(std::size_t{1} << 62), Catch::Contains("more than any memory holds"));
  Network empty(Shape{1, 8, 8});
  CHECK_THROWS_WITH(InferencePlanner(empty, backend, InferenceOptions{}), Catch::Contains("no layers"));
  const InferencePlanner planner(net, backend, InferenceOptions{});
  CHECK_THROWS_AS(planner.breakdown(0), ConfigError);
}

TEST_CASE("the inference table has its own rows", "[infer][plan]") {
  CpuBackend backend(1);
  Network net = make_preset("small-bn", Shape{1, 12, 12}, 4);
  InferenceOptions o;
  o.max_batch = 8;
  o.account = memory::BudgetAccount(std::size_t{1} << 30);
  const std::string table = format_inference_table(InferencePlanner(net, backend, o).breakdown(8));
  CHECK_THAT(table, Catch::Contains("inference plan for micro-batch 8"));
  CHECK_THAT(table, Catch::Contains("parameters"));
  CHECK_THAT(table, Catch::Contains("x the liveness lower bound"));
  CHECK_THAT(table, Catch::Contains("fits"));
  CHECK_THAT(table, !Catch::Contains("  parameter gradients"));
  CHECK_THAT(table, !Catch::Contains("  optimizer state"));
  CHECK_THAT(table, !Catch::Contains("recomputed"));
}
