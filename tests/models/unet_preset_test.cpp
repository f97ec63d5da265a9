// The unet preset (models/presets.cpp): its [classes, H, W] output, the depth it takes by default
// and its options, the refusals, its network text, and its parameter count against PyTorch's U-Net.
#include <catch2/catch.hpp>

#include <cstddef>
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include <cnnengine/base/error.hpp>
#include <cnnengine/models/network_text.hpp>
#include "tests/error_of.hpp"

using namespace cnn;
using cnn::testing::error_of;
using Catch::Matchers::Contains;

namespace {

int count_of(const Network& net, const std::string& type) {
  int n = 0;
  for (int id = 1; id < net.size(); ++id) n += net.node(id).layer->type_name() == type;
  return n;
}

std::size_t trainable_parameters(const Network& net) {
  std::size_t n = 0;
  for (int id = 1; id < net.size(); ++id)
    for (const ParamSpec& p : net.node(id).layer->parameters())
      if (p.trainable) n += p.shape.elements();
  return n;
}

// The map at the bottom of the U: the input of the first transposed convolution.
Shape bottom(const Network& net) {
  for (int id = 1; id < net.size(); ++id)
    if (net.node(id).layer->type_name() == "conv_transpose2d") return net.node(net.node(id).inputs.at(0)).shape;
  FAIL("no transposed convolution");
  return {};
}

// The trainable parameters of a U-Net by formula. A double convolution from `in` to `out`
// channels: two 3x3 kernels without bias and two BatchNorms' weight and bias. Going up: a 2x2
// transposed convolution from 2c to c channels with bias, then a double convolution from the
// concatenated 2c to c. Last, a 1x1 convolution with bias.
std::size_t unet_parameters(std::size_t in, std::size_t classes, int depth, std::size_t width) {
  auto double_conv = [](std::size_t from, std::size_t to) { return 9 * from * to + 9 * to * to + 4 * to; };
  std::size_t n = double_conv(in, width);
  for (int level = 1; level <= depth; ++level) n += double_conv(width << (level - 1), width << level);
  for (int level = depth - 1; level >= 0; --level) {
    const std::size_t c = width << level;
    n += 2 * c * c * 4 + c + double_conv(2 * c, c);
  }
  return n + width * classes + classes;
}

}  // namespace

TEST_CASE("unet gives a score per class and pixel at the input's size", "[presets][unet]") {
  const Network grey = make_preset("unet", Shape{1, 64, 64}, 2);
  CHECK(grey.output_shape() == Shape{2, 64, 64});
  CHECK(count_of(grey, "maxpool2d") == 4);  // the default depth
  CHECK(count_of(grey, "conv_transpose2d") == 4);
  CHECK(count_of(grey, "concat") == 4);
  CHECK(count_of(grey, "batchnorm2d") == 2 * (2 * 4 + 1));
  CHECK(bottom(grey) == Shape{32 << 4, 4, 4});
  CHECK(grey.node(1).shape == Shape{32, 64, 64});  // width 32 by default

  const Network rgb = make_preset("unet", Shape{3, 256, 256}, 5);
  CHECK(rgb.output_shape() == Shape{5, 256, 256});
  CHECK(bottom(rgb) == Shape{512, 16, 16});
  // Each concatenation puts the skip first, then the up-sampled map: 2c channels at its level.
  for (int id = 1; id < rgb.size(); ++id)
    if (rgb.node(id).layer->type_name() == "concat") {
      const Node& n = rgb.node(id);
      REQUIRE(n.inputs.size() == 2);
      CHECK(rgb.node(n.inputs[1]).layer->type_name() == "conv_transpose2d");
      CHECK(n.shape[0] == 2 * rgb.node(n.inputs[0]).shape[0]);
    }
}

TEST_CASE("unet's default depth is as many halvings as the input's sides divide by, up to 4", "[presets][unet]") {
  CHECK(count_of(make_preset("unet", Shape{1, 28, 28}, 3), "maxpool2d") == 2);   // 28 = 4 x 7
  CHECK(count_of(make_preset("unet", Shape{1, 12, 40}, 3), "maxpool2d") == 2);   // 12 = 4 x 3
  CHECK(count_of(make_preset("unet", Shape{3, 30, 32}, 3), "maxpool2d") == 1);   // 30 = 2 x 15
  CHECK(count_of(make_preset("unet", Shape{3, 512, 512}, 3), "maxpool2d") == 4);
  CHECK(make_preset("unet", Shape{1, 2, 2}, 2).output_shape() == Shape{2, 2, 2});
  CHECK(bottom(make_preset("unet", Shape{1, 2, 2}, 2)) == Shape{64, 1, 1});
  // An odd side cannot be halved even once.
  const std::string odd = error_of<ShapeError>([] { make_preset("unet", Shape{1, 27, 28}, 3); });
  CHECK_THAT(odd, Contains("unet halves the map 1 times") && Contains("multiples of 2") && Contains("1x27x28"));
}

TEST_CASE("unet's options: depth and width, each optional, in either order", "[presets][unet]") {
  const Network small = make_preset("unet:depth=2,width=8", Shape{1, 28, 28}, 3);
  CHECK(small.output_shape() == Shape{3, 28, 28});
  CHECK(count_of(small, "maxpool2d") == 2);
  CHECK(small.node(1).shape == Shape{8, 28, 28});
  CHECK(bottom(small) == Shape{32, 7, 7});
  CHECK(network_text(make_preset("unet:width=8,depth=2", Shape{1, 28, 28}, 3)) == network_text(small));
  CHECK(count_of(make_preset("unet:depth=3", Shape{1, 64, 64}, 2), "maxpool2d") == 3);
  CHECK(make_preset("unet:width=4", Shape{1, 64, 64}, 2).node(1).shape == Shape{4, 64, 64});
  CHECK(count_of(make_preset("unet:depth=6,width=1", Shape{1, 64, 64}, 2), "maxpool2d") == 6);
  // make_network takes the name with its options as a preset.
  CHECK(network_text(make_network("unet:depth=2,width=8", Shape{1, 28, 28}, 3)) == network_text(small));
  CHECK(std::find(preset_names().begin(), preset_names().end(), "unet") != preset_names().end());
  bool usage = false;
  for (const std::string& line : preset_usages()) usage = usage || line.find("unet[:depth=D,width=W]") == 0;
  CHECK(usage);
}

TEST_CASE("unet refuses a bad option or an input its depth cannot halve, naming it", "[presets][unet]") {
  const Shape image{1, 28, 28};
  struct Case {
    const char* model;
    std::vector<const char*> says;
  };
  const std::vector<Case> config_errors{
      {"unet:depth=0", {"depth=0 is out of range (1 to 16)"}},
      {"unet:width=0", {"width=0 is out of range"}},
      {"unet:depth=17", {"depth=17 is out of range"}},
      {"unet:depth=-1", {"depth=-1 is out of range"}},
      {"unet:depth=two", {"depth='two' is not a whole number"}},
      {"unet:depth=2.5", {"depth='2.5' is not a whole number"}},
      {"unet:depth=", {"depth='' is not a whole number"}},
      {"unet:width=99999999999", {"width=99999999999 is out of range (1 to 65536)"}},
      {"unet:size=3", {"unknown option 'size'", "depth=D and width=W"}},
      {"unet:depth=2,depth=3", {"depth is given twice"}},
      {"unet:depth=2,", {"the option '' is not KEY=VALUE"}},
      {"unet:depth", {"the option 'depth' is not KEY=VALUE"}},
      {"unet:", {"no options after the ':'"}},
      {"unet:width=32768", {"width 32768 doubled at each of 2 halvings is 131072 channels, over 65536"}},
      {"unet:depth=2,width=20000", {"80000 channels, over 65536"}},
      {"resnet:depth=2", {"the preset resnet takes no options"}},
      {"unets:depth=2", {"unknown model 'unets:depth=2'", "unet"}},
  };
  for (const Case& c : config_errors) {
    INFO(c.model);
    const std::string error = error_of<ConfigError>([&] { make_preset(c.model, image, 3); });
    CHECK_THAT(error, Contains(c.model));
    for (const char* part : c.says) CHECK_THAT(error, Contains(part));
  }
  CHECK_THAT(error_of<ConfigError>([&] { make_network("unet:depth=0", image, 3); }), Contains("depth=0"));

  // 28 is no multiple of 8: depth 3 would need a 3.5-pixel map.
  const std::string shape = error_of<ShapeError>([&] { make_preset("unet:depth=3", image, 3); });
  CHECK_THAT(shape, Contains("unet:depth=3 halves the map 3 times") && Contains("multiples of 8") &&
                        Contains("1x28x28") && Contains("depth="));
  CHECK_THROWS_AS(make_preset("unet:depth=5", Shape{3, 16, 16}, 3), ShapeError);
  CHECK_THROWS_WITH(make_preset("unet", Shape{784}, 3), Contains("CxHxW"));
}

TEST_CASE("unet's network text builds the same network", "[presets][unet][network]") {
  for (const char* model : {"unet", "unet:depth=2,width=8"}) {
    INFO(model);
    const Shape image{3, 32, 48};
    const Network net = make_preset(model, image, 4);
    const std::string text = network_text(net);
    const Network again = parse_network(text, image, 4 * 32 * 48);
    REQUIRE(again.size() == net.size());
    for (int id = 1; id < net.size(); ++id) {
      CHECK(again.node(id).inputs == net.node(id).inputs);
      CHECK(again.node(id).shape == net.node(id).shape);
      CHECK(again.node(id).layer->describe() == net.node(id).layer->describe());
    }
    CHECK(network_text(again) == text);
  }
}

TEST_CASE("unet's parameters: the formula, and PyTorch's U-Net at depth 4, width 64", "[presets][unet]") {
  // milesial/Pytorch-UNet's UNet(n_channels=3, n_classes=2, bilinear=False), the U-Net most
  // PyTorch code copies (bias-free 3x3 convolutions with BatchNorm, transposed convolutions and
  // the 1x1 head with bias), has 31,037,698 parameters; the formula agrees.
  CHECK(unet_parameters(3, 2, 4, 64) == 31'037'698);
  CHECK(trainable_parameters(make_preset("unet:width=64", Shape{3, 64, 64}, 2)) == 31'037'698);
  CHECK(trainable_parameters(make_preset("unet:depth=4,width=64", Shape{1, 256, 256}, 2)) ==
        unet_parameters(1, 2, 4, 64));
  CHECK(trainable_parameters(make_preset("unet", Shape{3, 128, 96}, 21)) == unet_parameters(3, 21, 4, 32));
  CHECK(trainable_parameters(make_preset("unet:depth=2,width=8", Shape{1, 28, 28}, 3)) ==
        unet_parameters(1, 3, 2, 8));
  CHECK(trainable_parameters(make_preset("unet:depth=1,width=5", Shape{2, 10, 6}, 7)) == unet_parameters(2, 7, 1, 5));
}
