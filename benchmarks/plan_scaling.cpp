// plan_scaling: how planning time grows with the layer count (4,000 layers once took
// 15 s to plan, 20,000 more than a minute). For chains of conv 3x3 + ReLU it times building the
// network, one training step's plan, the micro-batch choice under a budget (which plans several
// micro-batches), and a whole Trainer's start (planning, parameters, step memory), and prints
// them with the arena beside its lower bound.
//
//   plan_scaling [LAYERS...]      default: 1000 2000 4000 10000 20000
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include <cnnengine/cnnengine.hpp>
#include "engine/plan/detail/step_plan.hpp"
#include "engine/train/planning_options.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::string chain(int layers) {
  std::string text;
  for (int i = 0; i < layers / 2; ++i) text += "conv 4 3 pad=1\nrelu\n";
  return text + "flatten\ndense 10\n";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> counts;
  for (int i = 1; i < argc; ++i) counts.push_back(std::atoi(argv[i]));
  if (counts.empty()) counts = {1000, 2000, 4000, 10000, 20000};
  cnn::CpuBackend backend(1);
  std::printf("%8s %9s %10s %10s %10s %11s %14s %14s\n", "layers", "buffers", "build s", "plan s", "choose s",
              "trainer s", "arena", "lower bound");
  for (int layers : counts) {
    auto start = Clock::now();
    cnn::Network net = cnn::parse_network(chain(layers), cnn::Shape{4, 8, 8}, 10);
    const double build = seconds_since(start);
    start = Clock::now();
    const cnn::StepPlan plan = cnn::plan_step(net, backend, 8, true, std::size_t{1} << 20);
    const double planned = seconds_since(start);
    cnn::TrainerOptions options;
    options.batch = 64;
    options.memory_budget = plan.plan.arena_bytes * 4;  // the choice bisects over micro-batches
    start = Clock::now();
    const int chosen = cnn::BatchPlanner(net, backend, cnn::planning_options(options, net, backend)).choose();
    const double choose = seconds_since(start);
    start = Clock::now();
    const cnn::Trainer trainer(net, backend, options);
    const double trainer_start = seconds_since(start);
    std::printf("%8d %9zu %10.3f %10.3f %10.3f %11.3f %14zu %14zu   (micro-batch %d)\n", layers, plan.requests.size(),
                build, planned, choose, trainer_start, plan.plan.arena_bytes, plan.plan.lower_bound_bytes, chosen);
  }
  return 0;
}
