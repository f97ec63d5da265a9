// The built-in layers start as PyTorch's nn modules do: Conv2d, ConvTranspose2d and Linear draw
// their weight and bias from U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (kaiming_uniform_ with
// a = sqrt(5) for the weight), BatchNorm2d and GroupNorm start at 1 and 0, running statistics at
// 0 and 1. A network started otherwise (He normal on every weight) learned the multi-label and
// regression tasks worse than PyTorch with the same recipe (benchmarks/parity_torch.py).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include <cnnengine/engine/core/parameter_store.hpp>
#include "memory/host_resource.hpp"
#include <cnnengine/models/network_text.hpp>

using namespace cnn;

namespace {

struct Moments {
  double mean = 0, variance = 0, largest = 0;
};

Moments moments(const std::vector<float>& values) {
  Moments m;
  for (float v : values) {
    m.mean += v;
    m.largest = std::max(m.largest, std::abs(static_cast<double>(v)));
  }
  m.mean /= static_cast<double>(values.size());
  for (float v : values) m.variance += (v - m.mean) * (v - m.mean);
  m.variance /= static_cast<double>(values.size());
  return m;
}

}  // namespace

TEST_CASE("the built-in layers start as PyTorch's nn defaults", "[layers][init]") {
  // Large enough tensors for their moments to be near the distribution's.
  Network net = parse_network(R"(
conv 64 3 pad=1 bias=0
batchnorm
relu
dwconv 3 pad=1 bias=1
conv 32 5 pad=2 groups=4 bias=1
groupnorm 8
deconv 16 2 stride=2 bias=1
flatten
dense 300
relu
dense 10
)", Shape{8, 6, 6}, 10);
  CpuBackend backend(1);
  const auto store = ParameterStore::for_inference(net, backend, memory::host_resource(), 7);
  const std::vector<float> all = store->download();

  // fan_in for each uniform tensor, by "node name".
  const std::map<std::string, int> fan_in = {
      {"1 weight", 8 * 9},         {"4 weight", 1 * 9},        {"4 bias", 1 * 9},
      {"5 weight", 16 * 25},       {"5 bias", 16 * 25},        {"7 weight", 16 * 4},
      {"7 bias", 16 * 4},          {"9 weight", 16 * 12 * 12}, {"9 bias", 16 * 12 * 12},
      {"11 weight", 300},          {"11 bias", 300}};
  int uniform = 0;
  for (const ParameterStore::Place& p : ParameterStore::places(net)) {
    const std::string name = std::to_string(p.node) + " " + p.name;
    INFO(name << " " << net.node(p.node).layer->describe());
    const std::vector<float> values(all.begin() + static_cast<std::ptrdiff_t>(p.offset),
                                    all.begin() + static_cast<std::ptrdiff_t>(p.offset + p.shape.elements()));
    const Moments m = moments(values);
    if (const auto it = fan_in.find(name); it != fan_in.end()) {
      ++uniform;
      const double bound = 1.0 / std::sqrt(static_cast<double>(it->second));
      CHECK(m.largest <= bound);
      // U(-b, b): the largest of n values lies within b (1 - 10/n) of b but with odds e^-10.
      CHECK(m.largest >= bound * (1.0 - 10.0 / static_cast<double>(values.size())));
      const double sigma = bound / std::sqrt(3.0), n = static_cast<double>(values.size());
      CHECK(std::abs(m.mean) <= 5 * sigma / std::sqrt(n));
      // A square of U(-b, b) varies by 0.8 sigma^4: five of its standard errors, where that is a bound.
      if (n >= 100) CHECK(m.variance == Approx(sigma * sigma).epsilon(5 * std::sqrt(0.8 / n)));
    } else if (p.name == "gamma" || p.name == "running_var") {
      CHECK((m.mean == 1 && m.variance == 0));
    } else {
      CHECK(p.name != "weight");
      CHECK((m.mean == 0 && m.variance == 0 && m.largest == 0));
    }
  }
  CHECK(uniform == static_cast<int>(fan_in.size()));
}
