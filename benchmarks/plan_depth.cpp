// plan_depth: planning time by depth and recomputation policy, on the networks that once made it
// grow with the cube of depth: a convolution followed by ReLUs, and conv-BatchNorm-ReLU blocks
// with a residual addition every other block. For each, the time BatchPlanner takes to choose
// the micro-batch of a batch of 64 under a budget (the plan's total at micro-batch 8 without
// recomputation, so that the choice bisects and auto has to recompute), the micro-batch chosen,
// the layers recomputed and the arena.
//
//   plan_depth [LAYERS...]      default: 1000 2000 5000 10000
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include <cnnengine/cnnengine.hpp>
#include "engine/train/planning_options.hpp"

namespace {

using Clock = std::chrono::steady_clock;

std::string relu_chain(int layers) {
  std::string text = "conv 8 3 pad=1\n";
  for (int i = 1; i < layers; ++i) text += "relu\n";
  return text + "flatten\ndense 10\n";
}

std::string residual_blocks(int layers) {
  std::string text = "conv 8 3 pad=1 as=b0\n";
  for (int i = 1; 3 * i < layers; ++i) {
    text += "conv 8 3 pad=1\nbatchnorm\nrelu";
    if (i % 2 == 0) text += "\nadd b" + std::to_string(i - 2);
    text += " as=b" + std::to_string(i) + "\n";
  }
  return text + "flatten\ndense 10\n";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> depths;
  for (int i = 1; i < argc; ++i) depths.push_back(std::atoi(argv[i]));
  if (depths.empty()) depths = {1000, 2000, 5000, 10000};
  cnn::CpuBackend backend(1);
  const cnn::Shape image{1, 28, 28};
  std::printf("%-10s %7s %7s %-6s %10s %12s %11s %12s\n", "network", "layers", "nodes", "policy", "choose s",
              "micro-batch", "recomputed", "arena MiB");
  for (const char* kind : {"relus", "residual"})
    for (int depth : depths) {
      const std::string text = std::string(kind) == "relus" ? relu_chain(depth) : residual_blocks(depth);
      cnn::TrainerOptions options;
      options.batch = 64;
      {
        cnn::Network net = cnn::parse_network(text, image, 10);
        const cnn::BatchPlanner unbounded(net, backend, cnn::planning_options(options, net, backend));
        options.memory_budget = unbounded.breakdown(8).total();
      }
      for (cnn::RecomputePolicy policy :
           {cnn::RecomputePolicy::none, cnn::RecomputePolicy::cheap, cnn::RecomputePolicy::automatic}) {
        cnn::Network net = cnn::parse_network(text, image, 10);
        options.recompute = policy;
        const auto start = Clock::now();
        const cnn::BatchPlanner planner(net, backend, cnn::planning_options(options, net, backend));
        const int chosen = planner.choose();
        const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
        const cnn::MemoryBreakdown m = planner.breakdown(chosen > 0 ? chosen : 1);
        std::printf("%-10s %7d %7d %-6s %10.3f %12d %11d %12.1f\n", kind, depth, net.size(),
                    cnn::to_string(policy).c_str(), seconds, chosen, m.recomputed_layers,
                    static_cast<double>(m.arena_bytes) / (1 << 20));
        std::fflush(stdout);
      }
    }
  return 0;
}
