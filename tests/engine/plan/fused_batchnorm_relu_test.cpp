// BatchNorm and the ReLU after it in one pass, with a residual add between them, and a convolution
// and the ReLU after it (step_plan.cpp, Notes [BatchNorm and ReLU in one pass], [BatchNorm, add and
// ReLU in one pass] and [A convolution and its ReLU in one pass]): which pairs and triples a plan
// fuses and on which backends, the buffers they share, that the ReLU's output stays live for the
// fused layer's backward, and that training through the fused calls (the CPU's one pass, and the
// calls' default: the calls they are made of) gives the unfused run's bits, with float values and
// with 16-bit values taken as stored.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "engine/core/forwarding_backend.hpp"
#include "engine/plan/detail/step_plan.hpp"
#include <cnnengine/engine/train/trainer.hpp>
#include "memory/host_resource.hpp"
#include <cnnengine/models/network_text.hpp>
#include "tests/engine/stored_values_cpu.hpp"
#include "tests/engine/test_networks.hpp"

using namespace cnn;

namespace {

const Shape kImage{1, 8, 8};
constexpr int kClasses = 4, kBatch = 8, kSteps = 4;

// A CPU backend that says it runs BatchNorm and ReLU, BatchNorm, add and ReLU, and a convolution
// and ReLU in one pass, and counts the fused calls it gets (they run as the calls they are made
// of: Backend's default).
template <class Base>
class Fusing : public Base {
 public:
  using Base::Base;
  bool fuses_batchnorm_relu() const override { return true; }
  bool fuses_batchnorm_add_relu() const override { return true; }
  bool fuses_conv_relu() const override { return true; }
  int fused_forwards = 0, fused_backwards = 0, fused_add_forwards = 0, fused_add_backwards = 0;
  int fused_conv_forwards = 0;

 protected:
  void do_conv2d_relu_forward(const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y,
                              Workspace ws) override {
    ++fused_conv_forwards;
    Base::do_conv2d_relu_forward(d, x, w, bias, y, ws);
  }

  void do_batchnorm_relu_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y,
                                          Tensor running_mean, Tensor running_var, float momentum, float epsilon,
                                          Tensor saved_mean, Tensor saved_inv_std) override {
    ++fused_forwards;
    Base::do_batchnorm_relu_forward_training(x, gamma, beta, y, running_mean, running_var, momentum, epsilon,
                                             saved_mean, saved_inv_std);
  }
  void do_batchnorm_relu_backward(const Tensor& x, const Tensor& y, Tensor dy, const Tensor& gamma,
                                  const Tensor& saved_mean, const Tensor& saved_inv_std, float epsilon, Tensor dx,
                                  Tensor dgamma, Tensor dbeta, bool accumulate) override {
    ++fused_backwards;
    Base::do_batchnorm_relu_backward(x, y, dy, gamma, saved_mean, saved_inv_std, epsilon, dx, dgamma, dbeta,
                                     accumulate);
  }
  void do_batchnorm_add_relu_forward_training(const Tensor& x, const Tensor& residual, const Tensor& gamma,
                                              const Tensor& beta, Tensor y, Tensor running_mean, Tensor running_var,
                                              float momentum, float epsilon, Tensor saved_mean,
                                              Tensor saved_inv_std) override {
    ++fused_add_forwards;
    Base::do_batchnorm_add_relu_forward_training(x, residual, gamma, beta, y, running_mean, running_var, momentum,
                                                 epsilon, saved_mean, saved_inv_std);
  }
  void do_batchnorm_add_relu_backward(const Tensor& x, const Tensor& y, Tensor dy, const Tensor& gamma,
                                      const Tensor& saved_mean, const Tensor& saved_inv_std, float epsilon, Tensor dx,
                                      Tensor dgamma, Tensor dbeta, bool accumulate, Tensor dresidual,
                                      bool accumulate_residual) override {
    ++fused_add_backwards;
    Base::do_batchnorm_add_relu_backward(x, y, dy, gamma, saved_mean, saved_inv_std, epsilon, dx, dgamma, dbeta,
                                         accumulate, dresidual, accumulate_residual);
  }
};
using FusingCpu = Fusing<ForwardingBackend>;
using FusingStoredValuesCpu = Fusing<testing::StoredValuesCpu>;

// A CPU backend that says it does not: a step makes the two calls.
template <class Base>
class NotFusing : public Base {
 public:
  using Base::Base;
  bool fuses_batchnorm_relu() const override { return false; }
  bool fuses_batchnorm_add_relu() const override { return false; }
  bool fuses_conv_relu() const override { return false; }
};

// One that fuses BatchNorm's and not a convolution's.
template <class Base>
class BatchNormAlone : public Base {
 public:
  using Base::Base;
  bool fuses_conv_relu() const override { return false; }
};

// One that fuses the pairs alone.
template <class Base>
class PairsAlone : public Base {
 public:
  using Base::Base;
  bool fuses_batchnorm_add_relu() const override { return false; }
};

StepPlan plan(Network& net, Backend& backend, const RecomputeSet& recompute = {}) {
  StepNeeds needs = step_needs(net, backend, 4, true, std::size_t{64} << 20);
  needs.in_place = InPlaceSharing::always;
  return plan_step(net, needs, recompute);
}

std::vector<std::pair<int, int>> fused_pairs(const StepPlan& p) {
  std::vector<std::pair<int, int>> pairs;
  for (std::size_t b = 0; b < p.fused_relu.size(); ++b)
    if (p.fused_relu[b]) pairs.emplace_back(static_cast<int>(b), p.fused_relu[b]);
  return pairs;
}

struct Run {
  std::vector<float> losses;
  std::vector<float> parameters;
};

// A preset's name, or a network text (it has a newline).
Network make_network(const std::string& model) {
  return model.find('\n') == std::string::npos ? make_preset(model, kImage, kClasses)
                                               : parse_network(model, kImage, kClasses);
}

// Two BatchNorm and ReLU pairs, one before a residual add; no pooling between (a ReLU before max
// pooling moves after it: Network::commute_relu_and_max_pool).
const char* const kPairs =
    "conv 4 3 pad=1 bias=0\nbatchnorm\nrelu as=a\nconv 4 3 pad=1 bias=0\nbatchnorm\nrelu\nadd a\n"
    "flatten\ndense 4\n";

// BatchNorm, add and ReLU triples: 2-4 with the network input for residual (it has no gradient), 11-13
// with a BatchNorm's output (9), 15-17 with a ReLU's output that a convolution reads too (13: the
// residual's gradient is written, then added to); 6-7 a pair. Not the add 21: a ReLU comes right
// before it, and the BatchNorm 19 has a second reader.
const char* const kTriples =
    "conv 1 3 pad=1 bias=0\nbatchnorm\nadd input\nrelu as=a\n"                                  // 1-4
    "conv 4 3 pad=1 bias=0\nbatchnorm\nrelu\nconv 4 3 pad=1 bias=0\nbatchnorm as=m\n"              // 5-9
    "conv 4 1 bias=0 in=a\nbatchnorm\nadd m\nrelu as=b\n"                                        // 10-13
    "conv 4 3 pad=1 bias=0\nbatchnorm\nadd b\nrelu\n"                                            // 14-17
    "conv 4 3 pad=1 bias=0\nbatchnorm as=n\nrelu\nadd n\nrelu\nflatten\ndense 4\n";              // 18-24

// One triple (4-6) whose residual, the ReLU 2, another add reads later: the residual's gradient is
// written by the add 7, then added to by the BatchNorm 4 in its backward, then by the convolution 3.
const char* const kAddedTo =
    "conv 4 3 pad=1 bias=0\nrelu as=x\nconv 4 3 pad=1 bias=0\nbatchnorm\nadd x\nrelu\nadd x\nflatten\ndense 4\n";

// One triple (2-4) whose residual is the BatchNorm's own input: the residual's gradient and the
// BatchNorm's input gradient are one buffer, written by the one and added to by the other.
const char* const kOwnInput = "conv 4 3 pad=1 bias=0 as=c\nbatchnorm\nadd c\nrelu\nflatten\ndense 4\n";

// Convolutions with the ReLU after them on each of the CPU's kernels for a forward pass: a few
// channels (along the pixels), 16 (the direct kernel on AVX-512 and AVX2), depthwise, 1x1 (a matrix
// product), grouped; the last one's output has a second reader, so that its ReLU runs alone.
const char* const kConvs =
    "conv 16 3 pad=1\nrelu\nconv 16 3 pad=1\nrelu\ndwconv 3 pad=1\nrelu\nconv 16 1\nrelu\n"
    "conv 16 3 pad=1 groups=4\nrelu\nconv 16 3 pad=1 as=c\nrelu\nadd c\nflatten\ndense 4\n";

std::vector<std::pair<int, int>> relus_in_forward(const StepPlan& p) {
  std::vector<std::pair<int, int>> pairs;
  for (std::size_t c = 0; c < p.relu_in_forward.size(); ++c)
    if (p.relu_in_forward[c]) pairs.emplace_back(static_cast<int>(c), p.relu_in_forward[c]);
  return pairs;
}

std::vector<std::pair<int, int>> fused_adds(const StepPlan& p) {
  std::vector<std::pair<int, int>> adds;
  for (std::size_t b = 0; b < p.fused_add.size(); ++b)
    if (p.fused_add[b]) adds.emplace_back(static_cast<int>(b), p.fused_add[b]);
  return adds;
}

// With Strategy::direct each buffer exists only over its planned interval, so that a read or write
// outside it fails.
Run train(const std::string& model, Backend& backend, memory::Strategy strategy = memory::Strategy::planned) {
  Network net = make_network(model);
  TrainerOptions options = testing::constant_sgd(kBatch);
  options.micro_batch = kBatch / 2;
  options.seed = 7;
  options.narrow_values = NarrowValues::always;
  options.memory_strategy = strategy;
  Trainer trainer(net, backend, memory::host_resource(), options);
  const testing::SyntheticData data(kSteps * kBatch, kImage, kClasses, 23);
  Run run;
  for (int s = 0; s < kSteps; ++s) run.losses.push_back(trainer.train_step(data.batch(s * kBatch, kBatch)).loss);
  run.parameters = trainer.parameters().download();
  return run;
}

// `model`'s outputs for a few images on `parameters`, through a predictor.
std::vector<float> predicted(const std::string& model, Backend& backend, const std::vector<float>& parameters) {
  Network net = make_network(model);
  Predictor predictor(net, backend);
  predictor.parameters().upload(parameters);
  const testing::SyntheticData data(kBatch, kImage, kClasses, 29);
  std::vector<float> outputs(static_cast<std::size_t>(kBatch) * net.output_shape().elements());
  predictor.logits(data.images.data(), kBatch, outputs.data());
  return outputs;
}

}  // namespace

TEST_CASE("a BatchNorm runs the ReLU after it where the backend fuses them and the pair shares its buffers",
          "[plan][fusion]") {
  // 1 conv, 2 batchnorm, 3 relu, 4 conv, 5 batchnorm, 6 relu, 7 add (of 6 and 3), 8 batchnorm,
  // 9 relu, 10 conv, 11 batchnorm, 12 conv, 13 relu, 14 flatten, 15 dense: BatchNorms 2, 5 and 8
  // have a ReLU for their one reader (3's output having two readers of its own changes nothing),
  // 11 a convolution, and the ReLU 13 follows a convolution.
  Network net = parse_network(
      "conv 4 3 pad=1 bias=0\nbatchnorm\nrelu as=a\nconv 4 3 pad=1 bias=0\nbatchnorm\nrelu\nadd a\n"
      "batchnorm\nrelu\nconv 4 3 pad=1 bias=0\nbatchnorm\nconv 4 1\nrelu\nflatten\ndense 4\n",
      kImage, kClasses);
  CpuBackend cpu(1);
  FusingCpu fusing(cpu);
  NotFusing<ForwardingBackend> not_fusing(cpu);
  const StepPlan fused = plan(net, fusing);
  CHECK(fused_pairs(plan(net, cpu)) == fused_pairs(fused));  // the CPU runs them in one pass
  CHECK(fused_pairs(fused) == std::vector<std::pair<int, int>>{{2, 3}, {5, 6}, {8, 9}});
  for (auto [b, r] : fused_pairs(fused)) {
    CHECK(fused.fused_into[static_cast<std::size_t>(r)] == b);
    // The ReLU's output, the BatchNorm's buffer, is live at the BatchNorm's backward.
    const memory::BufferRequest& buffer = fused.requests[static_cast<std::size_t>(fused.node(r).value)];
    CHECK(fused.node(r).value == fused.node(b).value);
    CHECK(buffer.last_use >= fused.backward_time(b));
  }
  // Not on a backend that does not fuse them, nor where nothing runs in place.
  CHECK(fused_pairs(plan(net, not_fusing)).empty());
  StepNeeds separate = step_needs(net, fusing, 4, true, std::size_t{64} << 20);
  separate.in_place = InPlaceSharing::never;
  CHECK(fused_pairs(plan_step(net, separate)).empty());
  // Nor where either is recomputed (the ReLUs 3 and 9, whose outputs backward reads), nor in
  // inference.
  RecomputeSet recompute(static_cast<std::size_t>(net.size()), false);
  recompute[3] = true;
  recompute[9] = true;
  CHECK(fused_pairs(plan(net, fusing, recompute)) == std::vector<std::pair<int, int>>{{5, 6}});
  StepNeeds inference = step_needs(net, fusing, 4, false, std::size_t{64} << 20);
  CHECK(fused_pairs(plan_step(net, inference)).empty());
}

TEST_CASE("a convolution runs the ReLU after it in its forward call, and every buffer lives as long as without",
          "[plan][fusion]") {
  // kConvs: 1 conv, 2 relu, 3 conv, 4 relu, 5 dwconv, 6 relu, 7 conv, 8 relu, 9 conv, 10 relu,
  // 11 conv (read by the ReLU 12 and the add 13), 12 relu, 13 add, 14 flatten, 15 dense.
  Network net = parse_network(kConvs, kImage, kClasses);
  CpuBackend cpu(1);
  FusingCpu fusing(cpu);
  BatchNormAlone<ForwardingBackend> batchnorm_alone(cpu);
  const std::vector<std::pair<int, int>> pairs{{1, 2}, {3, 4}, {5, 6}, {7, 8}, {9, 10}};
  const StepPlan fused = plan(net, fusing), plain = plan(net, batchnorm_alone);
  CHECK(relus_in_forward(fused) == pairs);
  CHECK(relus_in_forward(plan(net, cpu)) == pairs);  // the CPU runs them in one pass
  CHECK(fused_pairs(fused).empty());                 // the ReLU's backward stays its own
  for (auto [c, r] : pairs) {
    CHECK(fused.forward_into[static_cast<std::size_t>(r)] == c);
    CHECK(fused.node(r).value == fused.node(c).value);
  }
  // The same buffers over the same times as the plan that runs each ReLU on its own.
  REQUIRE(fused.requests.size() == plain.requests.size());
  for (std::size_t k = 0; k < fused.requests.size(); ++k) {
    INFO(fused.requests[k].name);
    CHECK(fused.requests[k].bytes == plain.requests[k].bytes);
    CHECK(fused.requests[k].first_use == plain.requests[k].first_use);
    CHECK(fused.requests[k].last_use == plain.requests[k].last_use);
  }
  CHECK(fused.arena_bytes() == plain.arena_bytes());
  CHECK(relus_in_forward(plain).empty());
  // Not on a backend that does not fuse them, nor where nothing runs in place, nor where either is
  // recomputed (the ReLUs 2 and 8, whose outputs backward reads); in inference too.
  NotFusing<ForwardingBackend> not_fusing(cpu);
  CHECK(relus_in_forward(plan(net, not_fusing)).empty());
  StepNeeds separate = step_needs(net, fusing, 4, true, std::size_t{64} << 20);
  separate.in_place = InPlaceSharing::never;
  CHECK(relus_in_forward(plan_step(net, separate)).empty());
  RecomputeSet recompute(static_cast<std::size_t>(net.size()), false);
  recompute[2] = true;
  recompute[8] = true;
  CHECK(relus_in_forward(plan(net, fusing, recompute)) == std::vector<std::pair<int, int>>{{3, 4}, {5, 6}, {9, 10}});
  StepNeeds inference = step_needs(net, fusing, 4, false, std::size_t{64} << 20);
  inference.in_place = InPlaceSharing::always;
  CHECK(relus_in_forward(plan_step(net, inference)) == pairs);
}

TEST_CASE("a BatchNorm runs the residual add and the ReLU after it where the add comes right after it",
          "[plan][fusion]") {
  Network net = parse_network(kTriples, kImage, kClasses);
  CpuBackend cpu(1);
  FusingCpu fusing(cpu);
  NotFusing<ForwardingBackend> not_fusing(cpu);
  const StepPlan fused = plan(net, fusing);
  CHECK(fused_adds(fused) == std::vector<std::pair<int, int>>{{2, 3}, {11, 12}, {15, 16}});
  CHECK(fused_pairs(fused) == std::vector<std::pair<int, int>>{{2, 4}, {6, 7}, {11, 13}, {15, 17}});
  CHECK(fused_adds(plan(net, cpu)) == fused_adds(fused));  // the CPU runs them in one pass
  for (auto [b, a] : fused_adds(fused)) {
    INFO("BatchNorm " << b);
    const int r = fused.fused_relu[static_cast<std::size_t>(b)];
    CHECK(fused.fused_into[static_cast<std::size_t>(a)] == b);
    CHECK(fused.fused_into[static_cast<std::size_t>(r)] == b);
    // One buffer of values, live at the BatchNorm's backward, and one of gradients.
    CHECK(fused.node(a).value == fused.node(b).value);
    CHECK(fused.node(r).value == fused.node(b).value);
    CHECK(fused.requests[static_cast<std::size_t>(fused.node(b).value)].last_use >= fused.backward_time(b));
    CHECK(fused.node(a).value_grad == fused.node(r).value_grad);
    CHECK(fused.node(b).value_grad == fused.node(r).value_grad);
  }
  // The residual's gradient, written at the BatchNorm's backward, is live then (9's, of 11-13).
  const memory::BufferRequest& residual_grad = fused.requests[static_cast<std::size_t>(fused.node(9).value_grad)];
  CHECK(residual_grad.first_use <= fused.backward_time(11));
  CHECK(residual_grad.last_use >= fused.backward_time(11));
  // Not on a backend that does not fuse, where nothing runs in place, nor where the ReLU is
  // recomputed (17 here: of the three, only its output is read in backward), nor in inference.
  CHECK(fused_adds(plan(net, not_fusing)).empty());
  StepNeeds separate = step_needs(net, fusing, 4, true, std::size_t{64} << 20);
  separate.in_place = InPlaceSharing::never;
  CHECK(fused_adds(plan_step(net, separate)).empty());
  RecomputeSet recompute(static_cast<std::size_t>(net.size()), false);
  recompute[17] = true;
  CHECK(fused_adds(plan(net, fusing, recompute)) == std::vector<std::pair<int, int>>{{2, 3}, {11, 12}});
  StepNeeds inference = step_needs(net, fusing, 4, false, std::size_t{64} << 20);
  CHECK(fused_adds(plan_step(net, inference)).empty());
}

TEST_CASE("training through fused BatchNorm and ReLU calls gives the unfused run's bits", "[plan][fusion][train]") {
  for (const std::string model : {kPairs, kTriples, kAddedTo, kOwnInput, "resnet", kConvs}) {
    INFO(model);
    CpuBackend cpu(2);
    FusingCpu fusing(cpu);
    NotFusing<ForwardingBackend> not_fusing(cpu);
    const Run plain = train(model, not_fusing), fused = train(model, fusing), one_pass = train(model, cpu);
    const Run direct = train(model, fusing, memory::Strategy::direct);
    CHECK(direct.losses == plain.losses);
    CHECK(direct.parameters == plain.parameters);
    // Which fused calls each network makes: BatchNorm and ReLU, BatchNorm, add and ReLU, a
    // convolution and ReLU.
    const bool pairs = model == kPairs || model == kTriples || model == "resnet";
    const bool triples = model == kTriples || model == kAddedTo || model == kOwnInput || model == "resnet";
    const bool conv_pairs = model == kAddedTo || model == kConvs;
    CHECK((fusing.fused_forwards > 0) == pairs);
    CHECK((fusing.fused_backwards > 0) == pairs);
    CHECK((fusing.fused_add_forwards > 0) == triples);
    CHECK((fusing.fused_add_backwards > 0) == triples);
    CHECK((fusing.fused_conv_forwards > 0) == conv_pairs);
    CHECK(fused.losses == plain.losses);
    CHECK(fused.parameters == plain.parameters);
    CHECK(one_pass.losses == plain.losses);
    CHECK(one_pass.parameters == plain.parameters);
    // Predictions run a convolution's ReLU in its call too.
    const int trained_conv_forwards = fusing.fused_conv_forwards;
    CHECK(predicted(model, fusing, plain.parameters) == predicted(model, not_fusing, plain.parameters));
    CHECK(predicted(model, cpu, plain.parameters) == predicted(model, not_fusing, plain.parameters));
    CHECK((fusing.fused_conv_forwards > trained_conv_forwards) == conv_pairs);

    for (Precision precision : {Precision::bf16, Precision::fp16}) {
      INFO(to_string(precision) << " values taken as stored");
      CpuBackend cpu16(2, precision);
      FusingStoredValuesCpu fusing16(cpu16, true);
      const Run floats = train(model, cpu16), stored = train(model, fusing16);
      CHECK((fusing16.fused_forwards > 0) == pairs);
      CHECK((fusing16.fused_add_forwards > 0) == triples);
      CHECK((fusing16.fused_conv_forwards > 0) == conv_pairs);
      CHECK(stored.losses == floats.losses);
      CHECK(stored.parameters == floats.parameters);
    }
  }
}

// Sharing buffers is kept where it is smaller, or where it lets BatchNorm and ReLU run in one pass
// and the arena without it is not more than 1 % smaller (step_plan.cpp, plan_step). resnet50 at
// 224, micro-batch 32, in bf16 values: 0.46 % larger with its 49 BatchNorms fused (16 with their add).
TEST_CASE("a plan that fuses BatchNorm and ReLU is kept within 1 % of the arena without sharing", "[plan][fusion]") {
  Network net = make_preset("resnet50", Shape{3, 224, 224}, 10);
  CpuBackend cpu(1, Precision::bf16);
  NotFusing<testing::StoredValuesCpu> plain(cpu, true);
  FusingStoredValuesCpu fusing(cpu, true);
  auto planned = [&](Backend& backend, InPlaceSharing sharing) {
    StepNeeds needs = step_needs(net, backend, 32, true, std::size_t{256} << 20);
    needs.values = ValueFormat::bf16;
    needs.in_place = sharing;
    return plan_step(net, needs);
  };
  const StepPlan shared = planned(fusing, InPlaceSharing::always), separate = planned(fusing, InPlaceSharing::never);
  REQUIRE(separate.arena_bytes() < shared.arena_bytes());
  REQUIRE(separate.arena_bytes() * 101 > shared.arena_bytes() * 100);
  CHECK(fused_pairs(planned(fusing, InPlaceSharing::where_smaller)).size() == fused_pairs(shared).size());
  CHECK(fused_pairs(shared).size() == 49);
  CHECK(fused_adds(shared).size() == 16);
  // Without the fusion the smaller arena is kept, without the 1 % allowance.
  const std::size_t plain_shared = planned(plain, InPlaceSharing::always).arena_bytes();
  const std::size_t plain_separate = planned(plain, InPlaceSharing::never).arena_bytes();
  const StepPlan kept = planned(plain, InPlaceSharing::where_smaller);
  INFO("without the fusion: " << plain_shared << " bytes sharing, " << plain_separate << " not");
  CHECK(kept.arena_bytes() == std::min(plain_shared, plain_separate));
  CHECK(kept.in_place.empty() == (plain_separate < plain_shared));
}

// plan_step keeps a plan that runs the residual adds in their BatchNorm unless the one that fuses
// the pairs alone is more than 1 % smaller: the adds keep values longer.
TEST_CASE("a plan runs the residual adds in their BatchNorm unless that costs more than 1 % of its arena",
          "[plan][fusion]") {
  CpuBackend cpu(1);
  PairsAlone<ForwardingBackend> pairs_alone(cpu);
  auto planned = [](Network& net, Backend& backend, int micro_batch, InPlaceSharing sharing) {
    StepNeeds needs = step_needs(net, backend, micro_batch, true, std::size_t{256} << 20);
    needs.in_place = sharing;
    return plan_step(net, needs);
  };
  // resnet50 at 224: 0.47 % larger, kept.
  Network resnet50 = make_preset("resnet50", Shape{3, 224, 224}, 10);
  const StepPlan kept = planned(resnet50, cpu, 16, InPlaceSharing::where_smaller);
  const StepPlan pairs = planned(resnet50, pairs_alone, 16, InPlaceSharing::where_smaller);
  CHECK(fused_adds(kept).size() == 16);
  CHECK(fused_adds(pairs).empty());
  CHECK(kept.arena_bytes() > pairs.arena_bytes());
  CHECK(kept.arena_bytes() * 100 <= pairs.arena_bytes() * 101);
  // resnet on 1x64x64 at micro-batch 16: 1.3 % larger (whichever kernels take its convolutions),
  // so the pairs alone.
  Network resnet = make_preset("resnet", Shape{1, 64, 64}, 10);
  const StepPlan all = planned(resnet, cpu, 16, InPlaceSharing::always);
  const StepPlan chosen = planned(resnet, cpu, 16, InPlaceSharing::where_smaller);
  CHECK(!fused_adds(all).empty());
  CHECK(fused_adds(chosen).empty());
  CHECK(fused_pairs(chosen).size() == fused_pairs(planned(resnet, pairs_alone, 16, InPlaceSharing::always)).size());
  CHECK(all.arena_bytes() * 100 > chosen.arena_bytes() * 101);
  CHECK(chosen.arena_bytes() == planned(resnet, pairs_alone, 16, InPlaceSharing::where_smaller).arena_bytes());
}
