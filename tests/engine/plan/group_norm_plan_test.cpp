// What group and layer normalisation ask of the plan: nothing about the batch. Their statistics
// come from each sample alone, so the smallest micro-batch BatchNorm sets after a dense layer
// (batchnorm_plan_test.cpp) does not apply: micro-batches of 1 and 2 plan and train, where the
// same network with BatchNorm is refused, and a step gives the same gradients however it is split.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include <cnnengine/base/error.hpp>
#include "engine/plan/batch_planner.hpp"
#include "engine/train/planning_options.hpp"
#include "memory/host_resource.hpp"
#include <cnnengine/models/network_text.hpp>
#include "tests/engine/test_networks.hpp"

using namespace cnn;
using cnn::testing::constant_sgd;
using cnn::testing::SyntheticData;

namespace {

const Shape kImage{1, 6, 6};

// The same network with each normalisation after the convolution and after the dense layer.
Network with(const std::string& after_conv, const std::string& after_dense) {
  return parse_network(
      "conv 4 3 pad=1\n" + after_conv + "\nrelu\nflatten\ndense 16\n" + after_dense + "\nrelu\ndense 4\n", kImage, 4);
}

struct Variant {
  const char* name;
  const char* after_conv;
  const char* after_dense;
};
const Variant kSampleNorms[] = {{"group norm", "groupnorm 2", "groupnorm 4"},
                                {"layer norm", "layernorm", "layernorm"},
                                {"instance norm", "groupnorm 4", "groupnorm 2 eps=0.001"}};

}  // namespace

TEST_CASE("group and layer norm set no smallest micro-batch, where BatchNorm after a dense layer does",
          "[planner][group_norm]") {
  CpuBackend backend(1);
  BatchPlanOptions o;
  o.batch = 16;
  {
    Network bn = with("batchnorm", "batchnorm");
    CHECK(BatchPlanner(bn, backend, o).smallest_micro_batch() == 3);
    o.micro_batch = 2;
    CHECK_THROWS_WITH(BatchPlanner(bn, backend, o), Catch::Contains("micro-batch 2, too small"));
    o.micro_batch = 1;
    CHECK_THROWS_AS(BatchPlanner(bn, backend, o), ConfigError);
    o.micro_batch = 0;
    o.batch = 1;
    CHECK_THROWS_WITH(BatchPlanner(bn, backend, o), Catch::Contains("a batch of 1"));
  }
  for (const Variant& v : kSampleNorms) {
    INFO(v.name);
    Network net = with(v.after_conv, v.after_dense);
    o.batch = 16;
    o.micro_batch = 0;
    const BatchPlanner planner(net, backend, o);
    CHECK(planner.training_batch_need().samples == 1);
    CHECK(planner.training_batch_need().why.empty());
    CHECK(planner.smallest_micro_batch() == 1);
    for (int micro_batch : {1, 2}) {
      o.micro_batch = micro_batch;
      CHECK_NOTHROW(BatchPlanner(net, backend, o));
    }
    o.micro_batch = 0;
    o.batch = 1;
    CHECK_NOTHROW(BatchPlanner(net, backend, o));
  }
}

TEST_CASE("group and layer norm train on micro-batches of 1 and 2, with the gradients of the whole batch",
          "[trainer][group_norm]") {
  CpuBackend backend(2);
  const SyntheticData data(8, kImage, 4, 5);
  {
    Network bn = with("batchnorm", "batchnorm");
    TrainerOptions t = constant_sgd(7);
    t.micro_batch = 1;
    CHECK_THROWS_AS(Trainer(bn, backend, memory::host_resource(), t), ConfigError);
  }
  for (const Variant& v : kSampleNorms) {
    INFO(v.name);
    std::vector<std::vector<float>> parameters;
    for (int micro_batch : {7, 2, 1}) {
      INFO("micro-batch " << micro_batch);
      Network net = with(v.after_conv, v.after_dense);
      TrainerOptions t = constant_sgd(7);
      t.micro_batch = micro_batch;
      Trainer trainer(net, backend, memory::host_resource(), t);
      const StepReport r = trainer.train_step(data.batch(0, 7));
      CHECK(r.micro_batches == (7 + micro_batch - 1) / micro_batch);
      CHECK(std::isfinite(r.loss));
      // A batch of one sample (an epoch's last) trains too.
      Batch last = data.batch(7, 1);
      last.last_of_epoch = true;
      CHECK(std::isfinite(trainer.train_step(last).loss));
      parameters.push_back(trainer.parameters().download());
    }
    // Only the rounding of the gradients' sums differs between the splits.
    for (std::size_t run = 1; run < parameters.size(); ++run) {
      REQUIRE(parameters[run].size() == parameters[0].size());
      double worst = 0;
      for (std::size_t i = 0; i < parameters[0].size(); ++i)
        worst = std::max(worst, static_cast<double>(std::abs(parameters[run][i] - parameters[0][i])));
      CHECK(worst < 1e-5);
    }
  }
}

TEST_CASE("a step that recomputes group and layer norm outputs gives the parameters of one that keeps them",
          "[recompute][planner][group_norm]") {
  // The recomputation is forward again from the same input: the same statistics to the bit,
  // written over the ones forward kept (recompute_rewrites_saved is false).
  // The resnet preset with its BatchNorm layers group and layer norms in turn.
  const Shape image{1, 12, 12};
  std::string text = network_text(make_preset("resnet", image, 4));
  bool layer_norm = false;
  for (std::size_t at = text.find("batchnorm"); at != std::string::npos; at = text.find("batchnorm", at)) {
    text.replace(at, 9, layer_norm ? "layernorm" : "groupnorm 4");
    layer_norm = !layer_norm;
  }
  CpuBackend backend(2);
  const SyntheticData data(32, image, 4, 9);
  std::vector<std::vector<float>> parameters;
  for (RecomputePolicy policy : {RecomputePolicy::none, RecomputePolicy::cheap}) {
    INFO(to_string(policy));
    Network net = parse_network(text, image, 4);
    TrainerOptions t = constant_sgd(16);
    t.recompute = policy;
    Trainer trainer(net, backend, memory::host_resource(), t);
    if (policy == RecomputePolicy::cheap) {
      const BatchPlanner planner(net, backend, planning_options(t, net, backend));
      CHECK(planner.breakdown(16).recomputed_layers > 0);
    }
    for (int step = 0; step < 2; ++step) CHECK(std::isfinite(trainer.train_step(data.batch(step * 16, 16)).loss));
    parameters.push_back(trainer.parameters().download());
  }
  CHECK(parameters[0] == parameters[1]);
}
