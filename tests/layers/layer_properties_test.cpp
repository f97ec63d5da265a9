// What the engine asks a layer instead of its kind: a layer of one's own that says the same is
// treated the same, with no change to the engine.
#include <catch2/catch.hpp>

#include <cnnengine/engine/core/network.hpp>
#include "layers/batchnorm2d.hpp"
#include "layers/conv2d.hpp"
#include "layers/dense.hpp"
#include "layers/flatten.hpp"
#include "layers/pool2d.hpp"
#include "layers/relu.hpp"

using namespace cnn;

namespace {
// The identity, element-wise and non-decreasing as a leaky ReLU would be: it says it commutes with
// max pooling.
class Monotonic final : public Layer {
 public:
  std::string type_name() const override { return "monotonic"; }
  std::string describe() const override { return "monotonic"; }
  Shape output_shape(const std::vector<Shape>& inputs) override { return inputs.at(0); }
  bool commutes_with_max_pooling() const override { return true; }
  void forward(const LayerContext& c) override { c.backend->copy_or_add(c.inputs[0], c.output, false); }
  void backward(const LayerContext&) override {}
};
}  // namespace

TEST_CASE("the max pooling rewrite asks the layers, not their kinds", "[network]") {
  for (const bool own : {false, true}) {
    Network net(Shape{1, 8, 8});
    net.emplace<Conv2D>(4, 3, 1, 1);
    if (own) {
      net.add(std::make_unique<Monotonic>());
    } else {
      net.emplace<ReLU>();
    }
    net.emplace<Pool2D>(PoolMode::max, 2);
    net.emplace<Pool2D>(PoolMode::average, 2);  // average pooling is not a maximum: no swap
    net.emplace<ReLU>();
    net.emplace<Flatten>();
    net.emplace<Dense>(3);
    CHECK(net.commute_relu_and_max_pool() == 1);
    CHECK(net.node(2).name == "2:maxpool2d");
    CHECK(net.node(2).shape == Shape{4, 4, 4});
    CHECK(net.node(3).name == (own ? "3:monotonic" : "3:relu"));
    CHECK(net.node(3).shape == Shape{4, 4, 4});
  }
}

TEST_CASE("layers say what they are: type words and the properties the engine reads", "[layers]") {
  Pool2D global = Pool2D::global_average();
  Conv2D conv(2, 3);
  Dense dense(4);
  ReLU relu;
  Pool2D max(PoolMode::max, 2), average(PoolMode::average, 2);
  BatchNorm2D bn;
  Flatten flatten;
  CHECK(conv.type_name() == "conv2d");
  CHECK(dense.type_name() == "dense");
  CHECK(relu.type_name() == "relu");
  CHECK(max.type_name() == "maxpool2d");
  CHECK(average.type_name() == "avgpool2d");
  CHECK(global.type_name() == "global_avgpool");
  CHECK(bn.type_name() == "batchnorm2d");
  CHECK(flatten.type_name() == "flatten");

  CHECK(relu.commutes_with_max_pooling());
  CHECK_FALSE(conv.commutes_with_max_pooling());
  CHECK(max.is_max_pooling());
  CHECK_FALSE(average.is_max_pooling());
  CHECK_FALSE(global.is_max_pooling());

  bn.output_shape({Shape{6, 5, 5}});
  CHECK(bn.cross_rank_scratch_floats() == 12);  // two sums a channel
  CHECK(conv.cross_rank_scratch_floats() == 0);
}
