#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <climits>
#include <cmath>
#include <filesystem>

#include "backends/cpu/cpu_backend.hpp"
#include <cnnengine/base/error.hpp>
#include "layers/flatten.hpp"
#include "memory/host_resource.hpp"
#include <cnnengine/models/network_text.hpp>
#include "tests/data/data_test_files.hpp"
#include "tests/engine/test_networks.hpp"

using namespace cnn;

namespace {
std::string parse_error(const std::string& text) {
  try {
    parse_network(text, Shape{1, 28, 28}, 10, "net.txt");
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("the text format describes the small preset", "[network]") {
  const std::string text = R"(# small, written out
conv 32 3 pad=1
relu
maxpool 2
conv 64 3 pad=1
relu
maxpool 2
flatten
dense 128
relu
dense 10
)";
  Network parsed = parse_network(text, Shape{1, 28, 28}, 10);
  Network preset = make_preset("small", Shape{1, 28, 28}, 10);
  CHECK(parsed.summary() == preset.summary());
}

TEST_CASE("the text format expresses residual blocks", "[network]") {
  Network net = parse_network(R"(
conv 8 3 pad=1 as=stem
relu
conv 8 3 pad=1
add stem
relu
globalavgpool
flatten
dense 10
)", Shape{1, 28, 28}, 10);
  CHECK(net.size() == 9);
  CHECK(net.node(4).inputs == std::vector<int>{3, 1});
}

TEST_CASE("an input shape the network cannot take is an error naming the file", "[network]") {
  // A checkpoint's description gives the input shape: its error must name the checkpoint.
  const auto error_on = [](Shape input) {
    try {
      parse_network("flatten\ndense 3\n", input, 3, "run.ckpt");
    } catch (const ShapeError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(error_on(Shape{-1, 6, 6}).find("run.ckpt: the input [-1x6x6] has a side outside 1 to 65536") !=
        std::string::npos);
  CHECK(error_on(Shape{1, INT_MAX, INT_MAX}).find("run.ckpt: the input [1x2147483647x2147483647] has a side") !=
        std::string::npos);
}

TEST_CASE("network text errors name the file and line", "[network]") {
  CHECK(parse_error("conv 8 3\nfrobnicate\n").find("net.txt:2: unknown layer 'frobnicate'") != std::string::npos);
  CHECK(parse_error("conv 8\n").find("net.txt:1: expected: conv") != std::string::npos);
  CHECK(parse_error("conv x 3\n").find("net.txt:1: 'x' is not a number") != std::string::npos);
  CHECK(parse_error("conv 8 3\nadd nowhere\n").find("net.txt:2: no output is named 'nowhere'") != std::string::npos);
  CHECK(parse_error("conv 8 3 as=a\nconv 4 3\nadd a\n").find("net.txt:3:") != std::string::npos);  // shapes differ
  CHECK(parse_error("conv 8 31\n").find("smaller than the kernel") != std::string::npos);
  CHECK(parse_error("flatten\ndense 7\n").find("10 classes") != std::string::npos);
  CHECK(parse_error("# nothing\n").find("describes no layer") != std::string::npos);
  CHECK(parse_error("dropout 1.5\nflatten\ndense 10\n").find("net.txt:1:") != std::string::npos);
}

TEST_CASE("network text: unknown or repeated options and bad names are errors, not ignored", "[network]") {
  CHECK(parse_error("conv 8 3 foo=1\nflatten\ndense 10\n").find("net.txt:1: unknown option 'foo' for conv") !=
        std::string::npos);
  CHECK(parse_error("conv 8 3 strid=2\nflatten\ndense 10\n").find("unknown option 'strid'") != std::string::npos);
  CHECK(parse_error("relu pad=1\n").find("net.txt:1: unknown option 'pad' for relu") != std::string::npos);
  CHECK(parse_error("conv 8 3 pad=1 pad=2\nflatten\ndense 10\n").find("net.txt:1: option 'pad=' given twice") !=
        std::string::npos);
  CHECK(parse_error("conv 8 3 as=\nflatten\ndense 10\n").find("net.txt:1: as= needs a name") != std::string::npos);
  CHECK(parse_error("conv 8 3 as=x\nrelu as=x\nflatten\ndense 10\n")
            .find("net.txt:2: the name 'x' is already taken on line 1") != std::string::npos);
  CHECK(parse_error("conv 8 3 as=input\nflatten\ndense 10\n").find("already taken") != std::string::npos);
  CHECK(parse_error("conv 8 3 in=\nflatten\ndense 10\n").find("net.txt:1:") != std::string::npos);
  CHECK(parse_error("relu 3\nflatten\ndense 10\n").find("net.txt:1: expected: relu") != std::string::npos);
  CHECK(parse_error("conv 8 3 bias=2\nflatten\ndense 10\n").find("bias= takes 0 or 1") != std::string::npos);
  CHECK(parse_error("conv 8 3 pad=1.5\nflatten\ndense 10\n").find("'1.5' is not a whole number") != std::string::npos);
  CHECK(parse_error("conv 8 3 pad=1e20\nflatten\ndense 10\n").find("is not a whole number") != std::string::npos);
}

TEST_CASE("shapes are counted in 64 bits: more than INT_MAX elements per sample is an error", "[network]") {
  // 8 x 200026 x 200026 = 3.2e11 elements; Flatten's int product used to wrap to -2039341792.
  const std::string message = parse_error("conv 8 3 pad=100000\nflatten\ndense 10\n");
  INFO(message);
  CHECK(message.find("net.txt:1: layer 1 (conv") != std::string::npos);
  CHECK(message.find("[8x200026x200026]: more than " + std::to_string(INT_MAX) + " elements per sample") !=
        std::string::npos);
  CHECK_THROWS_AS(Network(Shape{1, 0, 28}), ShapeError);
  CHECK_THROWS_AS(Network(Shape{3, 50000, 50000}), ShapeError);
  // Flatten alone, given a shape the network would have refused.
  Flatten flatten;
  CHECK_THROWS_AS(flatten.output_shape({Shape{8, 200000, 200000}}), ShapeError);
}

TEST_CASE("padding that overflows an int is named as such, not as an input smaller than the kernel", "[network]") {
  const std::string conv = parse_error("conv 8 3 pad=1500000000\n");
  CHECK(conv.find("gives an output of") != std::string::npos);
  CHECK(conv.find("smaller than") == std::string::npos);
  // (28 + 2 x 1999999999 - 2e9) / 2e9 + 1 = 2: the pooling fits, and the text goes on to the end.
  const std::string pool = parse_error("maxpool 2000000000 pad=1999999999\n");
  CHECK(pool.find("smaller than the window") == std::string::npos);
  CHECK(pool.find("the network ends with [1x2x2]") != std::string::npos);
  CHECK(parse_error("conv 8 31\n").find("smaller than the kernel of 31") != std::string::npos);
}

TEST_CASE("a network file that is a FIFO is refused, not read (it would block)", "[network]") {
  cnn::data::test::TempFolder dir;
  const std::filesystem::path fifo = dir / "net.txt";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::string message;
  try {
    make_network(fifo.string(), Shape{1, 28, 28}, 10);
  } catch (const ConfigError& e) {
    message = e.what();
  }
  CHECK(message.find("it is a FIFO (named pipe), not a regular file") != std::string::npos);
}

TEST_CASE("unknown presets list the known ones", "[network]") {
  try {
    make_network("tiny", Shape{1, 28, 28}, 10);
    FAIL("accepted an unknown model");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()).find("small-bn") != std::string::npos);
  }
}

TEST_CASE("a network may end with a view", "[network][trainer]") {
  Network net = parse_network("conv 10 3 pad=1\nglobalavgpool\nflatten\n", Shape{1, 8, 8}, 10);
  CpuBackend backend(1);
  TrainerOptions o;
  o.batch = 8;
  Trainer trainer(net, backend, memory::host_resource(), o);
  testing::SyntheticData data(8, Shape{1, 8, 8}, 10, 1);
  const StepReport r = trainer.train_step(data.batch(0, 8));
  CHECK(std::isfinite(r.loss));
}

namespace {
// Every node's layer, shape and inputs, and the parameters' layout: what must survive a round trip.
std::string structure(const Network& net) {
  std::string text = net.summary();
  for (int id = 1; id < net.size(); ++id) {
    text += std::to_string(id) + ":";
    for (int in : net.node(id).inputs) text += " " + std::to_string(in);
    for (const ParamSpec& p : net.node(id).layer->parameters()) text += " " + p.name + p.shape.str();
    text += "\n";
  }
  return text;
}
}  // namespace

TEST_CASE("a network's text form builds the same network", "[network]") {
  const Shape image{3, 32, 32};
  for (const std::string& preset : preset_names()) {
    INFO(preset);
    const Network net = make_preset(preset, image, 10);
    const std::string text = network_text(net);
    const auto outputs = static_cast<int>(net.output_shape().elements());  // 10, or unet's 10 x 32 x 32
    const Network again = parse_network(text, image, outputs);
    CHECK(structure(again) == structure(net));
    CHECK(network_text(again) == text);
  }
  const std::string custom = "conv 8 3 stride=2 pad=1 bias=0 as=stem\nbatchnorm momentum=0.25 eps=0.001\n"
                             "relu as=act\nconv 8 1 in=stem\nadd act\navgpool 3 stride=1 pad=1\ndropout 0.3\n"
                             "globalavgpool\nflatten\ndense 10 bias=0\n";
  const Network net = parse_network(custom, image, 10);
  const std::string text = network_text(net);
  CHECK(structure(parse_network(text, image, 10)) == structure(net));
  CHECK(text.find("dropout 0.3\n") != std::string::npos);  // the shortest text of the float
  CHECK(text.find("batchnorm momentum=0.25 eps=0.001") != std::string::npos);
  CHECK(text.find("dense 10 bias=0") != std::string::npos);
}

TEST_CASE("a network with a layer of one's own has no text form", "[network]") {
  struct Custom final : Layer {
    std::string type_name() const override { return "mine"; }
    std::string describe() const override { return "mine"; }
    Shape output_shape(const std::vector<Shape>& inputs) override { return inputs.at(0); }
    void forward(const LayerContext&) override {}
    void backward(const LayerContext&) override {}
  };
  Network net(Shape{1, 4, 4});
  net.add(std::make_unique<Custom>());
  CHECK_THROWS_WITH(network_text(net), Catch::Contains("1:mine") && Catch::Contains("no text form"));
}
