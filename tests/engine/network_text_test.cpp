#include <catch2/catch.hpp>

#include <cmath>

#include "engine/cpu/cpu_backend.hpp"
#include "engine/presets.hpp"
#include "memory/host_resource.hpp"
#include "test_networks.hpp"

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

TEST_CASE("unknown presets list the known ones", "[network]") {
  try {
    make_network("tiny", Shape{1, 28, 28}, 10);
    FAIL("accepted an unknown model");
  } catch (const std::invalid_argument& e) {
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
