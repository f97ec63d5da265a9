// What BatchNorm asks of the plan.
// - One value per channel per sample (after a dense layer or a global pooling) has no variance on
//   a micro-batch of one sample: it would output beta, pass no gradient back and pull its running
//   variance towards zero. The planner keeps training micro-batches at two samples or more and
//   refuses what cannot, before step 1.
// - Its backward always writes an input gradient (cuDNN's has no form without one): reading the
//   network input, it gets a buffer to discard instead of writing over its output gradient.
#include <catch2/catch.hpp>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include <cnnengine/base/error.hpp>
#include "engine/plan/detail/step_plan.hpp"
#include "engine/train/planning_options.hpp"
#include "layers/batchnorm2d.hpp"
#include "layers/conv2d.hpp"
#include "layers/dense.hpp"
#include "layers/flatten.hpp"
#include "memory/budget_adaptor.hpp"
#include "memory/fault_injection_adaptor.hpp"
#include "memory/host_resource.hpp"
#include <cnnengine/memory/memory_stack.hpp>
#include "memory/statistics_adaptor.hpp"
#include <cnnengine/models/network_text.hpp>
#include "tests/engine/step_buffers.hpp"
#include "tests/engine/test_networks.hpp"
#include "tests/heap_counter.hpp"

using namespace cnn;
using cnn::testing::constant_sgd;
using cnn::testing::StepBufferStack;
using cnn::testing::SyntheticData;

namespace {

const Shape kImage{1, 6, 6};

Network dense_batchnorm() {
  return parse_network("conv 4 3 pad=1\nrelu\nflatten\ndense 16\nbatchnorm\nrelu\ndense 4\n", kImage, 4);
}

Network pooled_batchnorm() {
  return parse_network("conv 8 3 pad=1\nglobalavgpool\nbatchnorm\nflatten\ndense 4\n", kImage, 4);
}

std::vector<int> sizes(int samples, int micro_batch, int need = 1) {
  const MicroBatchSplit split = split_into_micro_batches(samples, micro_batch, need);
  std::vector<int> out;
  for (int j = 0; j < split.count; ++j) out.push_back(split.size(j));
  return out;
}

int total(const std::vector<int>& sizes) {
  int sum = 0;
  for (int s : sizes) sum += s;
  return sum;
}

}  // namespace

TEST_CASE("a step splits into micro-batches of the need or more, and of the micro-batch or less", "[planner]") {
  CHECK(sizes(16, 4) == std::vector<int>{4, 4, 4, 4});
  CHECK(sizes(10, 4) == std::vector<int>{4, 4, 2});
  CHECK(sizes(9, 4) == std::vector<int>{4, 4, 1});
  CHECK(sizes(9, 4, 2) == std::vector<int>{4, 3, 2});
  CHECK(sizes(7, 3, 2) == std::vector<int>{3, 2, 2});
  CHECK(sizes(4, 3, 2) == std::vector<int>{2, 2});
  CHECK(sizes(2, 2, 2) == std::vector<int>{2});
  CHECK_THROWS_AS(split_into_micro_batches(1, 3, 2), ConfigError);
  CHECK_THROWS_AS(split_into_micro_batches(5, 2, 2), ConfigError);  // 2 + 2 + 1: b < 2 x 2 - 1
  for (int need = 1; need <= 3; ++need)
    for (int b = 2 * need - 1; b <= 20; ++b)
      for (int samples = need; samples <= 70; ++samples) {
        INFO("need " << need << ", micro-batch " << b << ", " << samples << " samples");
        const std::vector<int> split = sizes(samples, b, need);
        REQUIRE(total(split) == samples);
        REQUIRE(static_cast<int>(split.size()) == (samples + b - 1) / b);  // no more than plain splitting
        for (int s : split) REQUIRE((s >= need && s <= b));
      }
}

TEST_CASE("a BatchNorm over one value per channel sets the smallest micro-batch", "[planner][batchnorm]") {
  CpuBackend backend(1);
  BatchPlanOptions o;
  o.batch = 16;
  SECTION("after a dense layer") {
    Network net = dense_batchnorm();
    const BatchPlanner planner(net, backend, o);
    CHECK(planner.training_batch_need().samples == 2);
    CHECK_THAT(planner.training_batch_need().why, Catch::Contains("5:batchnorm2d on [16]"));
    CHECK(planner.smallest_micro_batch() == 3);
  }
  SECTION("after a global pooling") {
    Network net = pooled_batchnorm();
    CHECK(BatchPlanner(net, backend, o).smallest_micro_batch() == 3);
  }
  SECTION("a batch of 2 may not be split") {
    Network net = dense_batchnorm();
    o.batch = 2;
    CHECK(BatchPlanner(net, backend, o).smallest_micro_batch() == 2);
  }
  SECTION("on images any micro-batch will do") {
    Network net = make_preset("small-bn", kImage, 4);
    const BatchPlanner planner(net, backend, o);
    CHECK(planner.training_batch_need().samples == 1);
    CHECK(planner.smallest_micro_batch() == 1);
  }
}

TEST_CASE("batches and micro-batches too small for such a BatchNorm are refused before step 1",
          "[planner][batchnorm]") {
  CpuBackend backend(1);
  Network net = dense_batchnorm();
  BatchPlanOptions o;
  o.batch = 1;
  CHECK_THROWS_WITH(BatchPlanner(net, backend, o), Catch::Contains("a batch of 1") && Catch::Contains("batchnorm2d"));
  o.batch = 16;
  o.micro_batch = 2;
  CHECK_THROWS_WITH(BatchPlanner(net, backend, o),
                    Catch::Contains("micro-batch 2, too small") && Catch::Contains("smallest micro-batch is 3"));
  o.micro_batch = 0;
  o.accumulate = 8;
  CHECK_THROWS_WITH(BatchPlanner(net, backend, o),
                    Catch::Contains("accumulating 8 micro-batches of a batch of 16 gives micro-batch 2, too small"));

  // A budget that holds micro-batch 2 but not 3: refused, naming micro-batch 3.
  TrainerOptions t = constant_sgd(16);
  const BatchPlanner probe(net, backend, planning_options(t, net, backend));
  t.memory_budget = probe.breakdown(2).total();
  REQUIRE(probe.breakdown(3).total() > t.memory_budget);
  memory::StatisticsAdaptor stats(memory::host_resource());
  CHECK_THROWS_WITH(Trainer(net, backend, stats, t), Catch::Contains("at micro-batch 3"));
  CHECK(stats.statistics().allocations == 0);
}

TEST_CASE("a trainer keeps such a BatchNorm's micro-batches at two samples or more", "[trainer][batchnorm]") {
  CpuBackend backend(1);
  Network net = dense_batchnorm();
  TrainerOptions o = constant_sgd(7);
  o.micro_batch = 3;
  Trainer trainer(net, backend, memory::host_resource(), o);
  const SyntheticData data(8, kImage, 4, 5);
  const StepReport r = trainer.train_step(data.batch(0, 7));  // 3 + 2 + 2, not 3 + 3 + 1
  CHECK(r.micro_batches == 3);
  CHECK(std::isfinite(r.loss));

  // A batch of one sample (an epoch's last) is refused and changes nothing.
  const std::vector<float> before = trainer.parameters().download();
  Batch last = data.batch(7, 1);
  last.last_of_epoch = true;
  CHECK_THROWS_WITH(trainer.train_step(last), Catch::Contains("a batch of 1 cannot train"));
  CHECK(trainer.parameters().download() == before);
  CHECK(trainer.steps() == 1);
  // Evaluation uses the running statistics: one sample is fine.
  bool given = false;
  const EvalResult eval = trainer.evaluate([&]() -> std::optional<Batch> {
    if (given) return std::nullopt;
    given = true;
    return data.batch(7, 1);
  });
  CHECK(eval.samples == 1);
}

TEST_CASE("a trainer planned for batches of 2 refuses a larger batch, and changes nothing", "[trainer][batchnorm]") {
  CpuBackend backend(1);
  Network net = dense_batchnorm();
  Trainer trainer(net, backend, memory::host_resource(), constant_sgd(2));
  REQUIRE(trainer.micro_batch() == 2);
  const SyntheticData data(4, kImage, 4, 7);
  CHECK(trainer.train_step(data.batch(0, 2)).micro_batches == 1);
  const std::vector<float> before = trainer.parameters().download();
  // Every batch the trainer takes splits into micro-batches of two samples or more: an odd one
  // larger than 2 would not (micro-batches of 2 to 2), and no larger one is taken.
  for (int size : {3, 4}) {
    INFO("a batch of " << size);
    CHECK_THROWS_WITH(trainer.train_step(data.batch(0, size)),
                      Catch::Contains("a batch of " + std::to_string(size)) &&
                          Catch::Contains("planned for batches of 2"));
  }
  CHECK(trainer.parameters().download() == before);
  CHECK(trainer.steps() == 1);
}

TEST_CASE("out-of-memory recovery halves no further than the smallest micro-batch", "[recovery][batchnorm]") {
  StepBufferStack buffers(memory::host_resource());
  memory::FaultInjectionAdaptor& faults = buffers.faults();
  Network net = dense_batchnorm();
  TrainerOptions o = constant_sgd(16);
  CpuBackend backend(1);
  Trainer trainer(net, backend, buffers.stack(), o);
  std::vector<std::string> recoveries;
  trainer.on_recovery = [&](const std::string& message) { recoveries.push_back(message); };
  const SyntheticData data(16, kImage, 4, 6);
  // The first request of each attempt fails: 16 -> 8 -> 4 -> 3, then nothing is left to halve.
  std::set<std::uint64_t> first_of_each;
  for (std::uint64_t i = 0; i < 200; ++i) first_of_each.insert(i);
  faults.fail_on(first_of_each);
  const std::vector<float> before = trainer.parameters().download();  // running statistics included
  CHECK_THROWS_WITH(trainer.train_step(data.batch(0, 16)),
                    Catch::Contains("micro-batch 3, the smallest planned for this network"));
  REQUIRE(recoveries.size() == 3);
  CHECK_THAT(recoveries.back(), Catch::Contains("replaying it at micro-batch 3"));
  CHECK(trainer.parameters().download() == before);
}

TEST_CASE("the layer refuses a one-sample training pass with one value per channel", "[batchnorm]") {
  BatchNorm2D layer;
  layer.output_shape({Shape{6}});
  LayerContext c;
  c.batch = 1;
  c.training = true;
  CHECK_THROWS_WITH(layer.forward(c), Catch::Contains("micro-batch of 1 sample"));
}

namespace {

// Records whether BatchNorm's backward was ever asked to write its input gradient over its
// output gradient.
class AliasSpy final : public CpuBackend {
 public:
  using CpuBackend::CpuBackend;
  int calls = 0, aliased = 0;
  float epsilon_seen = 0;
  void do_batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& saved_mean,
                             const Tensor& saved_inv_std, float epsilon, Tensor dx, Tensor dgamma, Tensor dbeta,
                             bool accumulate) override {
    ++calls;
    epsilon_seen = epsilon;
    if (dx.data == dy.data) ++aliased;
    CpuBackend::do_batchnorm_backward(x, dy, gamma, saved_mean, saved_inv_std, epsilon, dx, dgamma, dbeta, accumulate);
  }
};

}  // namespace

TEST_CASE("a BatchNorm on the network input writes its input gradient to a buffer of its own", "[planner][batchnorm]") {
  const char* text = "batchnorm\nconv 4 3 pad=1\nrelu\nflatten\ndense 4\n";
  AliasSpy backend(1);
  {
    Network net = parse_network(text, kImage, 4);
    const StepPlan training = plan_step(net, backend, 8, true, 0);
    const int discarded = training.node(1).discarded_input_grad;
    REQUIRE(discarded >= 0);
    CHECK(training.requests[static_cast<std::size_t>(discarded)].name == "discarded grad 1:batchnorm2d");
    CHECK(training.requests[static_cast<std::size_t>(discarded)].bytes == kImage.elements() * 8 * sizeof(float));
    CHECK(training.node(1).accumulate[0] == false);
    for (int id = 2; id < net.size(); ++id) CHECK(training.node(id).discarded_input_grad == -1);
    const StepPlan inference = plan_step(net, backend, 8, false, 0);
    CHECK(inference.node(1).discarded_input_grad == -1);
  }
  {
    Network net = make_preset("small-bn", kImage, 4);  // BatchNorm after convolutions: gradients wanted
    const StepPlan training = plan_step(net, backend, 8, true, 0);
    for (int id = 1; id < net.size(); ++id) CHECK(training.node(id).discarded_input_grad == -1);
  }

  Network net = parse_network(text, kImage, 4);
  Trainer trainer(net, backend, memory::host_resource(), constant_sgd(8));
  const SyntheticData data(8, kImage, 4, 9);
  CHECK(std::isfinite(trainer.train_step(data.batch(0, 8)).loss));
  CHECK(backend.calls == 1);
  CHECK(backend.aliased == 0);
}

TEST_CASE("a BatchNorm gives its backward the epsilon of its forward", "[batchnorm]") {
  // The CUDA backend once looked epsilon up by the saved buffer's address (1e-5 where unknown).
  AliasSpy backend(1);
  Network net(kImage);
  net.emplace<Conv2D>(4, 3, 1, 1);
  net.emplace<BatchNorm2D>(0.1f, 0.25f);
  net.emplace<Flatten>();
  net.emplace<Dense>(4);
  Trainer trainer(net, backend, memory::host_resource(), constant_sgd(8));
  const SyntheticData data(8, kImage, 4, 9);
  trainer.train_step(data.batch(0, 8));
  CHECK(backend.calls == 1);
  CHECK(backend.epsilon_seen == 0.25f);
}

TEST_CASE("steps that borrow, with BatchNorm on the input and after a dense layer, allocate nothing and "
          "give the same parameters under a framework-style strategy", "[trainer][batchnorm][memory]") {
  const char* text = "batchnorm\nconv 4 3 pad=1\nrelu\nflatten\ndense 16\nbatchnorm\nrelu\ndense 4\n";
  const int batch = 25, steps = 4, warm_up = 3;  // 25 at micro-batch 8: 8 + 8 + 7 + 2
  const SyntheticData data(batch * steps, kImage, 4, 11);
  TrainerOptions o = constant_sgd(batch);
  o.micro_batch = 8;
  CpuBackend backend(2);

  std::vector<float> planned;
  {
    Network net = parse_network(text, kImage, 4);
    Trainer trainer(net, backend, memory::host_resource(), o);
    // Warm-up: lazily built thread pools. A pool worker's first Eigen product sets up its OpenMP
    // state with malloc (32, 152 and 32 bytes seen under AddressSanitizer, on the worker): a
    // worker that took no range in one warm-up step did so in a measured step, 1 run in 12. Each
    // warm-up step is another chance for it to take one.
    for (int s = 0; s < warm_up; ++s) CHECK(trainer.train_step(data.batch(0, batch)).micro_batches == 4);
    const long heap_before = testing::heap_allocations();
    for (int s = 1; s < steps; ++s) trainer.train_step(data.batch(s * batch, batch));
    CHECK(testing::heap_allocations() == heap_before);
    planned = trainer.parameters().download();
  }
  StepBufferStack buffers(memory::host_resource());
  Network net = parse_network(text, kImage, 4);
  Trainer trainer(net, backend, buffers.stack(), o);
  for (int s = 0; s < warm_up; ++s) trainer.train_step(data.batch(0, batch));
  for (int s = 1; s < steps; ++s) trainer.train_step(data.batch(s * batch, batch));
  CHECK(trainer.parameters().download() == planned);  // the same operations on other addresses
  CHECK(buffers.step_buffers().current_bytes == 0);
}
