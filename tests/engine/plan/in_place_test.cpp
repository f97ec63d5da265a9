// Layers that run in place (Layer::runs_in_place, step_plan.cpp's Note [In place]): which
// outputs share their input's buffer, when they must not, and that sharing changes no result.
#include <catch2/catch.hpp>

#include <cstring>

#include "backends/cpu/cpu_backend.hpp"
#include "engine/plan/detail/step_plan.hpp"
#include <cnnengine/engine/train/trainer.hpp>
#include "layers/batchnorm2d.hpp"
#include "layers/conv2d.hpp"
#include "layers/dense.hpp"
#include "layers/dropout.hpp"
#include "layers/flatten.hpp"
#include "layers/pool2d.hpp"
#include "layers/relu.hpp"
#include "memory/host_resource.hpp"
#include <cnnengine/models/network_text.hpp>
#include "tests/engine/test_networks.hpp"

using namespace cnn;

namespace {

const Shape kImage{1, 8, 8};

Network parse(const std::string& text) { return parse_network(text, kImage, 4); }

// Sharing wherever the rule allows: whether it pays is the arena's packing, tested elsewhere.
StepPlan plan(Network& net, bool training, InPlaceSharing sharing = InPlaceSharing::always) {
  CpuBackend backend(1);
  StepNeeds needs = step_needs(net, backend, 4, training, std::size_t{64} << 20);
  needs.in_place = sharing;
  return plan_step(net, needs);
}

bool shares_value(const StepPlan& p, int id, int with) { return p.node(id).value == p.node(with).value; }
bool shares_grad(const StepPlan& p, int id, int with) { return p.node(id).value_grad == p.node(with).value_grad; }

// ReLU as a layer of one's own: the same kernels, never in place.
class SeparateRelu final : public Layer {
 public:
  std::string type_name() const override { return "separate_relu"; }
  std::string describe() const override { return "separate relu"; }
  Shape output_shape(const std::vector<Shape>& inputs) override { return relu_.output_shape(inputs); }
  bool backward_needs_output() const override { return true; }
  void forward(const LayerContext& c) override { relu_.forward(c); }
  void backward(const LayerContext& c) override { relu_.backward(c); }

 private:
  ReLU relu_;
};

}  // namespace

TEST_CASE("an activation writes over its input where nothing else reads it", "[plan][in-place]") {
  // 1 conv, 2 relu, 3 dropout, 4 maxpool, 5 flatten, 6 dense
  Network net = parse("conv 4 3 pad=1\nrelu\ndropout 0.2\nmaxpool 2\nflatten\ndense 4\n");
  for (bool training : {false, true}) {
    INFO((training ? "training" : "inference"));
    const StepPlan p = plan(net, training);
    CHECK(shares_value(p, 2, 1));
    if (training) {
      // The relu's backward reads its output: the dropout may not write over it. The gradients
      // form a chain: the dropout's backward writes over its own, the relu's over that.
      CHECK_FALSE(shares_value(p, 3, 2));
      CHECK(p.in_place == std::vector<int>{2});
      CHECK(shares_grad(p, 1, 3));
      CHECK(shares_grad(p, 2, 3));
    } else {
      CHECK(shares_value(p, 3, 1));  // a chain: relu over the convolution, dropout over the relu
      CHECK(p.in_place == std::vector<int>{2, 3});
    }
  }
}

TEST_CASE("an activation keeps its own buffer where its input is still needed", "[plan][in-place]") {
  SECTION("the input is read again later (a residual)") {
    Network net = parse("conv 4 3 pad=1 as=skip\nrelu\nconv 4 3 pad=1\nadd skip\nflatten\ndense 4\n");
    const StepPlan p = plan(net, true);
    CHECK_FALSE(shares_value(p, 2, 1));
    CHECK_FALSE(shares_grad(p, 1, 2));  // the convolution's output has two readers
  }
  SECTION("the producer's backward reads its output (max pooling)") {
    Network net = parse("conv 4 3 pad=1\nmaxpool 2\nrelu\nflatten\ndense 4\n");
    const StepPlan training = plan(net, true);
    CHECK_FALSE(shares_value(training, 3, 2));
    CHECK(shares_grad(training, 2, 3));  // gradients still share: the relu is the only reader
    CHECK(shares_value(plan(net, false), 3, 2));  // inference keeps nothing for backward
  }
  SECTION("the input is the network's") {
    Network net = parse("relu\nconv 4 3 pad=1\nflatten\ndense 4\n");
    for (bool training : {false, true}) CHECK(plan(net, training).in_place.empty());
  }
}

TEST_CASE("a plan shares buffers only where its arena comes out no larger", "[plan][in-place]") {
  for (const char* text : {"conv 4 3 pad=1\nrelu\ndropout 0.2\nmaxpool 2\nflatten\ndense 4\n",
                           "conv 8 3 pad=1\nbatchnorm\nrelu\nconv 8 3 pad=1\nbatchnorm\nrelu\nmaxpool 2\nflatten\n"
                           "dense 16\nrelu\ndense 4\n"}) {
    Network net = parse(text);
    for (bool training : {false, true}) {
      const StepPlan best = plan(net, training, InPlaceSharing::where_smaller);
      const std::size_t shared = plan(net, training, InPlaceSharing::always).arena_bytes();
      const std::size_t separate = plan(net, training, InPlaceSharing::never).arena_bytes();
      CHECK(best.arena_bytes() == std::min(shared, separate));
      CHECK(best.in_place.empty() == (separate < shared));
      CHECK(plan(net, training, InPlaceSharing::never).in_place.empty());
    }
  }
}

TEST_CASE("training in place gives the bits of training with separate buffers", "[plan][in-place][trainer]") {
  auto build = [](bool in_place) {
    auto relu = [&]() -> std::unique_ptr<Layer> {
      if (in_place) return std::make_unique<ReLU>();
      return std::make_unique<SeparateRelu>();
    };
    Network net(kImage);
    net.emplace<Conv2D>(8, 3, 1, 1);
    net.emplace<BatchNorm2D>();
    net.add(relu());
    net.emplace<Conv2D>(8, 3, 1, 1);
    net.add(relu());
    net.emplace<Pool2D>(PoolMode::max, 2);
    net.emplace<Flatten>();
    net.emplace<Dense>(16);
    net.add(relu());
    net.emplace<Dropout>(0.3f);
    net.emplace<Dense>(4);
    return net;
  };
  const testing::SyntheticData data(4 * 16, kImage, 4, 5);
  std::vector<std::vector<float>> parameters;
  std::vector<double> losses[2];
  for (int run = 0; run < 2; ++run) {
    Network net = build(run == 0);
    CpuBackend backend(2);
    TrainerOptions options = testing::constant_sgd(16);
    options.micro_batch = 8;
    options.seed = 11;
    Trainer trainer(net, backend, memory::host_resource(), options);
    for (int s = 0; s < 4; ++s) losses[run].push_back(trainer.train_step(data.batch(s * 16, 16)).loss);
    parameters.push_back(trainer.parameters().download());
    if (run == 0) CHECK(trainer.breakdown(8).in_place_layers > 0);
  }
  CHECK(losses[0] == losses[1]);
  REQUIRE(parameters[0].size() == parameters[1].size());
  CHECK(std::memcmp(parameters[0].data(), parameters[1].data(), parameters[0].size() * sizeof(float)) == 0);
}

TEST_CASE("activations whose derivative needs only their output run in place, the others do not",
          "[plan][in-place][activation]") {
  for (const char* word : {"relu6", "sigmoid", "tanh", "hardsigmoid", "leakyrelu", "silu", "gelu", "hardswish",
                           "leakyrelu slope=-0.5"}) {
    INFO(word);
    const bool from_output = std::string(word).find_first_of(" ") == std::string::npos &&
                             std::string(word) != "silu" && std::string(word) != "gelu" &&
                             std::string(word) != "hardswish";
    Network net = parse(std::string("conv 4 3 pad=1\n") + word + "\nflatten\ndense 4\n");
    for (bool training : {false, true}) {
      const StepPlan p = plan(net, training);
      CHECK(shares_value(p, 2, 1) == from_output);
      if (training) CHECK(shares_grad(p, 1, 2) == from_output);
    }
  }
}
