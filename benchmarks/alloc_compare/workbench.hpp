#pragma once
// What every workload shares: the network and backend, the base upstream, the step plans (made
// once per batch size), and the bytes the Trainer would hold outside the step.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/plan/batch_planner.hpp"
#include "engine/plan/detail/micro_batch_plan.hpp"
#include <cnnengine/memory/memory_resource.hpp>
#include "rig.hpp"
#include "run_result.hpp"

namespace alloc_compare {

struct BenchConfig {
  std::uint64_t seed = 1;
  double arena_factor = 2.0;  // the arena strategy's reservation without a budget, × the plan's arena
  int warmup = 1;
};

class Workbench {
 public:
  Workbench(std::function<cnn::Network()> make_network, cnn::Backend& backend,
            cnn::memory::MemoryResource& base, BenchConfig config);

  cnn::Network& network() { return network_; }  // the one plans are made on
  cnn::Network fresh_network() const { return make_network_(); }  // for a Trainer of its own
  cnn::Backend& backend() const { return backend_; }
  cnn::memory::MemoryResource& base() { return base_; }
  const BenchConfig& config() const { return config_; }

  // The training step's plan at this micro-batch as the Trainer makes it under `budget` (0:
  // none; a budget lowers convolution workspaces where the backend has leaner algorithms), made
  // once.
  const cnn::StepPlan& plan(int batch, std::size_t budget = 0);
  // As the Trainer sees it: persistent blocks (parameters, gradients, optimizer state, metrics),
  // the arena (training or evaluation, whichever is larger) and the liveness lower bound.
  cnn::MemoryBreakdown breakdown(int batch, std::size_t budget = 0);
  cnn::BatchPlanOptions plan_options(std::size_t budget) const;

  // A fresh result for one run, with its reference (lower bound + persistent bytes).
  RunResult start(const std::string& workload, cnn::memory::Strategy strategy, std::size_t budget,
                  std::size_t reference_bytes) const;

 private:
  std::function<cnn::Network()> make_network_;
  cnn::Network network_;
  cnn::Backend& backend_;
  cnn::memory::MemoryResource& base_;
  BenchConfig config_;
  const cnn::MicroBatchPlan& plans(int batch, std::size_t budget);
  // By micro-batch and budget; a map: references stay valid as it grows.
  std::map<std::pair<int, std::size_t>, cnn::MicroBatchPlan> plans_;
};

// A run's rig: `persistent` bytes held for the whole run and the planned arena size the arena
// strategy (MemoryStack::build_step_buffers); the libraries' workspace counts in the budget.
RigConfig rig_config(const Workbench& bench, cnn::memory::Strategy strategy, std::size_t budget, std::size_t persistent,
                     std::size_t planned_arena);

// Blocks held for a whole run (persistent blocks, the planned arena), freed in reverse order.
class HeldBlocks {
 public:
  HeldBlocks() = default;
  HeldBlocks(const HeldBlocks&) = delete;
  HeldBlocks& operator=(const HeldBlocks&) = delete;
  ~HeldBlocks();
  void* add(cnn::memory::MemoryResource& from, std::size_t bytes, cnn::memory::Category category,
            std::size_t alignment = cnn::memory::kDefaultAlignment);

 private:
  struct Block {
    cnn::memory::MemoryResource* from;
    void* ptr;
    std::size_t bytes, alignment;
    cnn::memory::Category category;
  };
  std::vector<Block> blocks_;
};

// The batch of churn step `step`: drawn from [max(1, batch/2), batch] by a counter-based
// generator, so every strategy sees the same sequence.
int churn_batch(std::uint64_t seed, long step, int batch);

}  // namespace alloc_compare
