// The built-in layers as an application adds them (layers/builtin_layers.hpp): each function
// builds the layer its network-text word builds, with PyTorch's defaults, and refuses what the
// layer refuses.
#include <catch2/catch.hpp>

#include <cnnengine/base/error.hpp>
#include <cnnengine/engine/core/network.hpp>
#include "layers/batchnorm2d.hpp"
#include <cnnengine/layers/builtin_layers.hpp>
#include "layers/conv2d.hpp"
#include "layers/dense.hpp"
#include "layers/dropout.hpp"
#include "layers/pool2d.hpp"
#include <cnnengine/models/network_text.hpp>

using namespace cnn;

TEST_CASE("every built-in layer function builds what its network-text line builds", "[layers]") {
  Network net(Shape{3, 16, 16});
  net.add(layers::conv2d(8, 3, 2, 1, /*bias*/ false));
  net.add(layers::batchnorm2d(0.25f, 1e-3f));
  const int block = net.add(layers::relu());
  net.add(layers::conv2d(8, 3, 1, 1));
  net.add(layers::add(), {block, net.last()});
  net.add(layers::max_pool2d(2));
  net.add(layers::avg_pool2d(3, 1, 1));
  const int pooled = net.last();
  net.add(layers::global_avg_pool2d());
  net.add(layers::flatten());
  net.add(layers::dropout(0.25f));
  net.add(layers::dense(10, /*bias*/ false));
  REQUIRE(net.output_shape() == Shape{10});
  REQUIRE(net.node(pooled).shape == Shape{8, 4, 4});

  const std::string text = network_text(net);
  const Network parsed = parse_network(text, Shape{3, 16, 16}, 10);
  REQUIRE(network_text(parsed) == text);
  REQUIRE(parsed.size() == net.size());
  for (int id = 1; id < net.size(); ++id) {
    INFO("node " << id << ": " << net.node(id).layer->describe());
    CHECK(parsed.node(id).layer->type_name() == net.node(id).layer->type_name());
    CHECK(parsed.node(id).layer->describe() == net.node(id).layer->describe());
    CHECK(parsed.node(id).inputs == net.node(id).inputs);
    CHECK(parsed.node(id).shape == net.node(id).shape);
  }
}

TEST_CASE("the built-in layer functions take PyTorch's defaults", "[layers]") {
  const auto conv = layers::conv2d(4, 5);
  const auto& c = dynamic_cast<const Conv2D&>(*conv);
  CHECK(c.desc().stride == 1);
  CHECK(c.desc().padding == 0);
  CHECK(c.has_bias());

  CHECK(dynamic_cast<const Dense&>(*layers::dense(3)).has_bias());

  const auto max = layers::max_pool2d(3);
  const auto& m = dynamic_cast<const Pool2D&>(*max);
  CHECK(m.desc().mode == PoolMode::max);
  CHECK(m.desc().stride_h == 3);  // the window
  CHECK(m.desc().pad_h == 0);
  CHECK(dynamic_cast<const Pool2D&>(*layers::avg_pool2d(2)).desc().mode == PoolMode::average);
  CHECK(dynamic_cast<const Pool2D&>(*layers::global_avg_pool2d()).is_global());

  const auto bn = layers::batchnorm2d();
  CHECK(dynamic_cast<const BatchNorm2D&>(*bn).momentum() == 0.1f);
  CHECK(dynamic_cast<const BatchNorm2D&>(*bn).epsilon() == 1e-5f);
  CHECK(dynamic_cast<const Dropout&>(*layers::dropout(0.5f)).p() == 0.5f);
}

TEST_CASE("the built-in layer functions refuse what the layers refuse, naming the layer", "[layers]") {
  CHECK_THROWS_WITH(layers::conv2d(0, 3), Catch::Contains("conv2d"));
  CHECK_THROWS_WITH(layers::conv2d(4, 3, 0), Catch::Contains("conv2d"));
  CHECK_THROWS_WITH(layers::conv2d(4, 3, 1, -1), Catch::Contains("conv2d"));
  CHECK_THROWS_WITH(layers::dense(0), Catch::Contains("dense"));
  CHECK_THROWS_WITH(layers::max_pool2d(0), Catch::Contains("pool2d"));
  CHECK_THROWS_WITH(layers::avg_pool2d(2, 1, 2), Catch::Contains("pool2d"));  // padding as large as the window
  CHECK_THROWS_WITH(layers::batchnorm2d(0.f), Catch::Contains("batchnorm2d"));
  CHECK_THROWS_WITH(layers::batchnorm2d(0.1f, 0.f), Catch::Contains("batchnorm2d"));
  CHECK_THROWS_WITH(layers::dropout(1.f), Catch::Contains("dropout"));
  CHECK_THROWS_AS(layers::dropout(-0.1f), ConfigError);

  // Shapes are checked when the network adds the layer.
  Network net(Shape{1, 4, 4});
  CHECK_THROWS_AS(net.add(layers::conv2d(2, 5)), ShapeError);
  const int a = net.add(layers::conv2d(2, 3, 1, 1));
  net.add(layers::conv2d(3, 3, 1, 1));
  CHECK_THROWS_AS(net.add(layers::add(), {a, net.last()}), ShapeError);  // 2 channels and 3
  CHECK_THROWS_AS(net.add(layers::add()), ShapeError);                   // one input
  CHECK(net.size() == 3);  // what was refused was not added
}
