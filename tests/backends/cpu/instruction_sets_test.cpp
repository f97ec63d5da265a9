// Training on the CPU gives the same losses on every instruction set the host can run: the
// products are summed the same way on each (Note [One product on every instruction set],
// backends/cpu/detail/gemm.cpp), BatchNorm's passes too (batchnorm_channel.inl), and CNN_CPU_ISA
// or IsaLimit only choose a slower path. The direct convolution (on AVX-512 and AVX2 hosts) sums in
// its own order: it is held off for that
// comparison, and its training is held to the products' within rounding.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/detail/cpu_isa.hpp"
#include "backends/cpu/detail/direct_conv.hpp"
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
  const cpu::DirectOff direct_off;
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

// resnet's 3x3 layers (16 channels on 20 x 20, 32 on 10 x 10, 64 on 5 x 5) take the direct
// convolution on an AVX-512 or AVX2 host, its first stride-2 layer's backward-data in phases:
// trained with it and without, the losses agree within rounding.
TEST_CASE("CPU training: the direct convolution trains as the matrix products do", "[cpu][conv][train]") {
  if (cpu::isa() < cpu::CpuIsa::avx2) {
    WARN("this host has no AVX2: the direct convolution does not run here");
    return;
  }
  const Shape image{3, 20, 20};
  REQUIRE(cpu::direct_applies(Conv2dDesc{64, 64, 3, 3, 1, 1}, Shape{16, 64, 5, 5}, false, cpu::DirectPass::forward));
  REQUIRE(cpu::direct_applies(Conv2dDesc{16, 16, 3, 3, 1, 1}, Shape{16, 16, 20, 20}, false,
                              cpu::DirectPass::backward_filter));
  REQUIRE(cpu::direct_applies(Conv2dDesc{16, 32, 3, 3, 2, 1}, Shape{16, 16, 20, 20}, false,
                              cpu::DirectPass::backward_data));
  const std::vector<float> direct = losses("resnet", image, 4);
  std::vector<float> products;
  {
    const cpu::DirectOff off;
    products = losses("resnet", image, 4);
  }
  REQUIRE(direct.size() == products.size());
  for (std::size_t s = 0; s < direct.size(); ++s) CHECK(direct[s] == Approx(products[s]).epsilon(1e-4));
}
