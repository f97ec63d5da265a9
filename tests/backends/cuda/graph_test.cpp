// CUDA graphs (--cuda-graph): replayed micro-batches give the eager GPU run's losses and
// parameters, with dropout, BatchNorm, accumulation and a smaller last micro-batch, and once
// recorded a step allocates nothing.
#include <cuda_runtime.h>

#include <catch2/catch.hpp>
#include <cmath>

#include <cnnengine/engine/train/trainer.hpp>
#include "memory/statistics_adaptor.hpp"
#include <cnnengine/models/network_text.hpp>
#include "support.hpp"
#include "tests/engine/test_networks.hpp"
#include "tests/relative_error.hpp"

using namespace cnn;
using cnn::testing::SyntheticData;

namespace {

const Shape kImage{1, 28, 28};

struct GraphRun {
  std::vector<double> losses;
  std::vector<float> parameters;
  long replays = 0;
  bool still_capturing = false;
};

// Steps of 32, 32, ..., then one of 20 (another micro-batch size and gradient scale).
GraphRun run(const std::string& model, int micro_batch, bool graphs, int steps = 12) {
  Backend& gpu = cuda_test::gpu_deterministic();
  TrainerOptions o = cnn::testing::constant_sgd(32);
  o.micro_batch = micro_batch;
  o.capture_graphs = graphs ? GraphCapture::always : GraphCapture::never;
  // A preset's name, or a network text (it has a newline).
  Network net = model.find('\n') == std::string::npos ? make_preset(model, kImage, 10) : parse_network(model, kImage, 10);
  Trainer trainer(net, gpu, gpu.device_memory(), o);
  SyntheticData data(32 * steps, kImage, 10, 23);
  GraphRun r;
  for (int s = 0; s < steps; ++s) {
    Batch batch = data.batch(s * 32, s + 1 == steps ? 20 : 32);
    batch.last_of_epoch = s + 1 == steps;  // the one batch that may be smaller
    r.losses.push_back(trainer.train_step(batch).loss);
  }
  r.parameters = trainer.parameters().download();
  r.replays = trainer.graph_replays();
  r.still_capturing = trainer.capturing_graphs();
  return r;
}

// The graph run against the eager one: no capture failed, some replays, and the same kernels and
// deterministic algorithms.
void check_same_as_eager(const std::string& model, int micro_batch) {
  const GraphRun eager = run(model, micro_batch, false), graphs = run(model, micro_batch, true);
  CHECK(graphs.still_capturing);
  CHECK(graphs.replays > 0);
  double worst = 0;
  for (std::size_t i = 0; i < eager.losses.size(); ++i)
    worst = std::max(worst, std::abs(eager.losses[i] - graphs.losses[i]) / eager.losses[i]);
  INFO("largest relative loss difference " << worst);
  CHECK(worst < 1e-5);
  CHECK(cnn::testing::relative_error(graphs.parameters, eager.parameters) < 1e-5);
}

}  // namespace

TEST_CASE("cuda graphs give the eager GPU run's losses and parameters", "[cuda][graphs]") {
  for (const char* model : {"small", "small-bn", "resnet"}) {
    for (int micro_batch : {0, 12}) {  // 1 x 32; 12 + 12 + 8
      INFO(model << ", micro-batch " << micro_batch);
      check_same_as_eager(model, micro_batch);
    }
  }
}

TEST_CASE("cuda graphs with BatchNorm on the input and micro-batches that borrow", "[cuda][graphs][batchnorm]") {
  // BatchNorm on the input (a discarded input gradient) and after a dense layer (two samples or
  // more): 32 at micro-batch 31 runs 30 + 2, the last step 20: three recorded sizes.
  const std::string text = "batchnorm\nconv 8 3 pad=1\nrelu\nmaxpool 2\nflatten\ndense 32\nbatchnorm\nrelu\ndense 10\n";
  check_same_as_eager(text, 31);
}

TEST_CASE("a recorded GPU training step allocates nothing", "[cuda][graphs]") {
  Backend& gpu = cuda_test::gpu();
  memory::StatisticsAdaptor stats(gpu.device_memory());
  Network net = make_preset("small-bn", kImage, 10);
  TrainerOptions o = cnn::testing::constant_sgd(64);
  o.capture_graphs = GraphCapture::always;
  Trainer trainer(net, gpu, stats, o);
  SyntheticData data(64 * 8, kImage, 10, 3);
  for (int s = 0; s < 3; ++s) trainer.train_step(data.batch(s * 64, 64));  // eager, recorded, replayed
  gpu.synchronize();
  const auto before = stats.statistics();
  std::size_t free_before = 0, total = 0;
  REQUIRE(cudaMemGetInfo(&free_before, &total) == cudaSuccess);
  for (int s = 3; s < 8; ++s) trainer.train_step(data.batch(s * 64, 64));
  gpu.synchronize();
  std::size_t free_after = 0;
  REQUIRE(cudaMemGetInfo(&free_after, &total) == cudaSuccess);
  CHECK(stats.statistics().allocations == before.allocations);
  CHECK(free_after == free_before);
  CHECK(trainer.graph_replays() >= 6);
}
