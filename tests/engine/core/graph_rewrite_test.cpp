#include <catch2/catch.hpp>

#include "backends/cpu/cpu_backend.hpp"
#include "memory/host_resource.hpp"
#include <cnnengine/models/network_text.hpp>
#include "tests/engine/test_networks.hpp"

using namespace cnn;

TEST_CASE("ReLU before max pooling commutes without changing the training", "[network][trainer]") {
  const Shape image{1, 12, 12};
  testing::SyntheticData data(32 * 5, image, 4, 3);
  auto run = [&](bool rewrite, std::string* summary) {
    Network net = make_preset("small", image, 4);
    if (rewrite) CHECK(net.commute_relu_and_max_pool() == 2);
    *summary = net.summary();
    CpuBackend backend(2);
    TrainerOptions o;
    o.batch = 32;
    o.rewrite_graph = false;  // this test does (or not) the rewrite itself
    Trainer trainer(net, backend, memory::host_resource(), o);
    std::vector<double> losses;
    for (int s = 0; s < 5; ++s) losses.push_back(trainer.train_step(data.batch(s * 32, 32)).loss);
    return std::make_pair(losses, trainer.parameters().download());
  };
  std::string plain_summary, rewritten_summary;
  const auto plain = run(false, &plain_summary);
  const auto rewritten = run(true, &rewritten_summary);
  CHECK(plain.first == rewritten.first);
  CHECK(plain.second == rewritten.second);
  CHECK(rewritten_summary.find("2  maxpool2d") != std::string::npos);  // node 2 pools, node 3 is the ReLU
  CHECK(plain_summary != rewritten_summary);
}

TEST_CASE("a ReLU read by more than the pooling stays where it is", "[network]") {
  Network net = parse_network(R"(
conv 4 3 pad=1
relu as=r
maxpool 2 as=p
conv 4 3 pad=1 in=r
maxpool 2
add p
flatten
dense 10
)", Shape{1, 8, 8}, 10);
  CHECK(net.commute_relu_and_max_pool() == 0);
}
