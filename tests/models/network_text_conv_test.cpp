// The convolution words of network text: conv with groups, dilation and pad=same, dwconv and
// deconv; every option read, written back only where it is not the default, and round trips.
#include <catch2/catch.hpp>

#include <cnnengine/base/error.hpp>
#include "layers/conv2d.hpp"
#include "layers/conv_transpose2d.hpp"
#include <cnnengine/models/network_text.hpp>

using namespace cnn;

namespace {

std::string parse_error(const std::string& text, Shape input = Shape{1, 28, 28}) {
  try {
    parse_network(text, input, 10, "net.txt");
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

const Layer& layer_at(const Network& net, int id) { return *net.node(id).layer; }

}  // namespace

TEST_CASE("network text: conv with groups, dilation and pad=same", "[network][conv]") {
  const Network net = parse_network("conv 8 3 pad=same dilation=2 groups=4 bias=0\nconv 8 5 stride=2 pad=1\n"
                                    "flatten\ndense 10\n",
                                    Shape{4, 20, 20}, 10);
  const auto& grouped = dynamic_cast<const Conv2D&>(layer_at(net, 1));
  CHECK(grouped.desc().groups == 4);
  CHECK(grouped.desc().dilation == 2);
  CHECK(grouped.desc().padding == 2);
  CHECK_FALSE(grouped.has_bias());
  CHECK(net.node(1).shape == Shape{8, 20, 20});
  CHECK(net.node(2).shape == Shape{8, 9, 9});
  const std::string text = network_text(net);
  CHECK(text.find("conv 8 3 pad=same dilation=2 groups=4 bias=0\n") != std::string::npos);
  CHECK(text.find("conv 8 5 stride=2 pad=1\n") != std::string::npos);
  CHECK(network_text(parse_network(text, Shape{4, 20, 20}, 10)) == text);
}

TEST_CASE("network text: dwconv and deconv", "[network][conv]") {
  const std::string source =
      "conv 8 3 pad=1\ndwconv 3 stride=2 pad=1\ndwconv 5 pad=same bias=0\ndwconv 3 dilation=2 pad=2\n"
      "deconv 4 2 stride=2\ndeconv 6 3 stride=2 pad=1 output_pad=1 bias=0\ndeconv 2 3\nflatten\ndense 10\n";
  const Network net = parse_network(source, Shape{1, 28, 28}, 10);
  CHECK(net.node(2).shape == Shape{8, 14, 14});
  CHECK(net.node(2).layer->type_name() == "depthwise_conv2d");
  CHECK(net.node(3).shape == Shape{8, 14, 14});
  CHECK(net.node(4).shape == Shape{8, 14, 14});
  CHECK(net.node(5).shape == Shape{4, 28, 28});
  CHECK(net.node(6).shape == Shape{6, 56, 56});
  CHECK(net.node(7).shape == Shape{2, 58, 58});
  const auto& deconv = dynamic_cast<const ConvTranspose2D&>(layer_at(net, 6));
  CHECK(deconv.output_padding() == 1);
  CHECK_FALSE(deconv.has_bias());
  const std::string text = network_text(net);
  for (const char* line : {"dwconv 3 stride=2 pad=1\n", "dwconv 5 pad=same bias=0\n", "dwconv 3 pad=2 dilation=2\n",
                           "deconv 4 2 stride=2\n", "deconv 6 3 stride=2 pad=1 output_pad=1 bias=0\n", "deconv 2 3\n"}) {
    INFO(line);
    CHECK(text.find(line) != std::string::npos);
  }
  CHECK(network_text(parse_network(text, Shape{1, 28, 28}, 10)) == text);
}

TEST_CASE("network text: the convolutions' bad options are errors naming them", "[network][conv]") {
  CHECK(parse_error("conv 8 3 groups=3\nflatten\ndense 10\n").find("net.txt:1:") != std::string::npos);
  CHECK(parse_error("conv 8 3 groups=3\nflatten\ndense 10\n").find("groups=3") != std::string::npos);
  CHECK(parse_error("conv 8 3 groups=0\nflatten\ndense 10\n").find("groups=0") != std::string::npos);
  CHECK(parse_error("conv 8 3 dilation=0\nflatten\ndense 10\n").find("dilation=0") != std::string::npos);
  CHECK(parse_error("conv 8 4 pad=same\nflatten\ndense 10\n").find("pad=same needs an odd kernel") != std::string::npos);
  CHECK(parse_error("conv 8 3 stride=2 pad=same\nflatten\ndense 10\n").find("stride 2") != std::string::npos);
  CHECK(parse_error("conv 8 3 pad=half\nflatten\ndense 10\n").find("pad= takes a whole number or 'same'") !=
        std::string::npos);
  CHECK(parse_error("conv 8 3 output_pad=1\nflatten\ndense 10\n").find("unknown option 'output_pad' for conv") !=
        std::string::npos);
  const std::string dw = parse_error("dwconv 3 groups=2\nflatten\ndense 10\n");
  CHECK(dw.find("unknown option 'groups' for dwconv") != std::string::npos);
  CHECK(parse_error("dwconv\nflatten\ndense 10\n").find("expected: dwconv KERNEL") != std::string::npos);
  CHECK(parse_error("dwconv 3 bias=2\nflatten\ndense 10\n").find("bias= takes 0 or 1") != std::string::npos);
  CHECK(parse_error("deconv 4 3 stride=2 output_pad=2\nflatten\ndense 10\n").find("output_pad=2") != std::string::npos);
  CHECK(parse_error("deconv 4 3 dilation=2\nflatten\ndense 10\n").find("unknown option 'dilation' for deconv") !=
        std::string::npos);
  CHECK(parse_error("deconv 4\nflatten\ndense 10\n").find("expected: deconv OUT KERNEL") != std::string::npos);
  CHECK(parse_error("dwconv 3 dilation=20\nflatten\ndense 10\n").find("net.txt:1:") != std::string::npos);
}
