// Training on the CPU gives the same losses on every instruction set the host can run: the
// products are summed the same way on each (Note [One product on every instruction set],
// backends/cpu/detail/gemm.cpp), BatchNorm's passes too (batchnorm_channel.inl), and CNN_CPU_ISA
// or IsaLimit only choose a slower path.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/detail/cpu_isa.hpp"
#include "backends/cpu/detail/gemm.hpp"
#include "tests/engine/test_networks.hpp"

using namespace cnn;

namespace {

// Steps of SGD on synthetic data: convolutions at stride 1 and 2, 1x1 shortcuts, BatchNorm (resnet),
// dense layers.
std::vector<float> losses(const std::string& model, const Shape& image, int steps) {
  CpuBackend backend(2);
  TrainerOptions options = testing::constant_sgd(16);
  options.optimizer.learning_rate = 0.05f;
  options.seed = 3;
  return testing::preset_losses(backend, model, image, options, steps, 17);
}

}  // namespace

TEST_CASE("CPU training: every instruction set the host has gives the same losses", "[gemm][train]") {
  INFO("host: " << cpu::isa_name(cpu::isa()));
  for (const auto& [model, image] : {std::pair<std::string, Shape>{"small", Shape{1, 28, 28}}, {"resnet", Shape{3, 20, 20}}}) {
    CAPTURE(model);
    std::vector<float> portable;
    {
      const cpu::IsaLimit limit(cpu::CpuIsa::portable);
      portable = losses(model, image, 4);
    }
    CHECK(portable.back() == portable.back());  // finite, not NaN
    for (cpu::CpuIsa isa : {cpu::CpuIsa::avx2, cpu::CpuIsa::avx512}) {
      if (isa > cpu::isa()) continue;
      CAPTURE(cpu::isa_name(isa));
      const cpu::IsaLimit limit(isa);
      CHECK(losses(model, image, 4) == portable);
    }
  }
}
