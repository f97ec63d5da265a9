// cuDNN's algorithms measured inside a budget (Note [Measuring inside the budget],
// backends/cuda/detail/conv_algorithms.hpp): the scratch tensors and workspace come from the
// memory a planner hands the backend, and never more than it leaves.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>

#include "memory/budget_adaptor.hpp"
#include "memory/statistics_adaptor.hpp"
#include "support.hpp"

using namespace cnn;

namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

// A convolution whose shapes no other test uses, so that this one measures it.
struct UnusualConv {
  Conv2dDesc desc;
  Shape x, y;
};
UnusualConv unusual_conv(int batch, int height) {
  UnusualConv c;
  c.desc.in_channels = 13;
  c.desc.out_channels = 19;
  c.desc.kernel_h = c.desc.kernel_w = 3;
  c.desc.padding = 1;
  c.x = Shape{batch, 13, height, 29};
  c.y = Shape{batch, 19, height, 29};
  return c;
}

// conv2d_workspace_bytes for both backward passes, measuring with `scratch` as the query memory.
std::size_t query_within(Backend& backend, memory::MemoryResource& scratch, const UnusualConv& c) {
  memory::MemoryResource* before = backend.set_query_memory(&scratch);
  const std::size_t bytes = backend.conv2d_workspace_bytes(c.desc, c.x, c.y, ConvPass::backward, 256 * MiB);
  backend.set_query_memory(before);
  return bytes;
}

}  // namespace

TEST_CASE("cuda a measurement takes its scratch from the query memory, within its budget", "[cuda][algorithms]") {
  Backend& gpu = cuda_test::gpu();
  memory::StatisticsAdaptor stats(gpu.device_memory());
  memory::BudgetAdaptor budget(stats, 24 * MiB);
  const UnusualConv c = unusual_conv(17, 41);
  query_within(gpu, budget, c);
  const memory::Statistics s = stats.statistics();
  CHECK(s.allocations >= 8);  // x, y, w and a workspace for each backward pass
  CHECK(s.current_bytes == 0);
  CHECK(budget.peak_bytes() <= 24 * MiB);
  CHECK(s.peak_by_category[memory::Category::workspace] == s.peak_bytes);
}

TEST_CASE("cuda a budget too small for the measurement's tensors leaves the choice to the heuristics",
          "[cuda][algorithms]") {
  Backend& gpu = cuda_test::gpu();
  memory::StatisticsAdaptor stats(gpu.device_memory());
  memory::BudgetAdaptor budget(stats, 64 * 1024);  // less than x alone: 17 x 13 x 43 x 29 floats
  const UnusualConv c = unusual_conv(17, 43);
  const std::size_t bytes = query_within(gpu, budget, c);
  CHECK(budget.peak_bytes() == 0);  // nothing was even asked of the budget
  CHECK(stats.statistics().allocations == 0);
  // The heuristics' choice runs.
  cuda_test::Twin x(gpu, c.x, 1), dy(gpu, c.y, 2), dw(gpu, Shape{19, 13, 3, 3}, 3);
  Backend& cpu = cuda_test::cpu();
  const std::size_t cpu_bytes = cpu.conv2d_workspace_bytes(c.desc, c.x, c.y, ConvPass::backward, SIZE_MAX);
  cuda_test::DeviceBuffer gpu_ws(gpu, bytes), cpu_ws(cpu, cpu_bytes);
  gpu.conv2d_backward_filter(c.desc, x.gpu(), dy.gpu(), dw.gpu(), Tensor{}, Workspace{gpu_ws.data(), bytes});
  cpu.conv2d_backward_filter(c.desc, x.cpu(), dy.cpu(), dw.cpu(), Tensor{}, Workspace{cpu_ws.data(), cpu_bytes});
  CHECK(dw.relative_error() <= 1e-4);
}
