#pragma once
// What a trainer needs to run one micro-batch size: the training and inference plans, their step
// memory (one planned arena, or a strategy's buffers) and their executors. They are built and
// released together, here and nowhere else; MicroBatchRecovery chooses which size.
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "engine/plan/batch_planner.hpp"
#include "engine/plan/detail/micro_batch_plan.hpp"
#include "engine/plan/micro_batch_recovery.hpp"
#include "engine/train/detail/step_executor.hpp"
#include "engine/train/detail/step_memory.hpp"
#include "memory/buffer.hpp"
#include <cnnengine/memory/memory_stack.hpp>

namespace cnn {

class StepResources final : public MicroBatchMemory {
 public:
  // capture: the executors record each micro-batch size as a graph (StepExecutor).
  StepResources(Network& network, Backend& backend, ParameterStore& params, const BatchPlanner& planner,
                memory::MemoryStack& stack, StepSlots slots, bool capture);
  StepResources(const StepResources&) = delete;
  StepResources& operator=(const StepResources&) = delete;
  ~StepResources() { release(); }

  // Plans micro-batch b and reserves its step memory. On failure holds nothing and rethrows.
  void build(int micro_batch) override;
  // After an out-of-memory failure at micro-batch b, under RecomputePolicy::automatic: builds b
  // again with a step arena no larger than half of b would take (or than the failed one, at
  // micro-batch 1), recomputing more. False, holding nothing, where recomputation cannot reach it,
  // the memory still cannot be had, or the policy is another.
  bool recompute_more() override;
  // Built by recompute_more: beyond what the budget alone asks.
  bool recomputing_more() const override { return arena_cap_.has_value(); }
  int recomputed_layers() const override { return plans_.breakdown.recomputed_layers; }
  // Gives back the step memory: the one place it is released.
  void release() override;
  std::string cannot_reserve(int micro_batch) const override;
  std::string byte_table(int micro_batch) const override;

  bool built() const { return executor_ != nullptr; }
  int micro_batch() const { return micro_batch_; }
  const MemoryBreakdown& breakdown() const { return plans_.breakdown; }
  const StepPlan& plan() const { return plans_.training; }
  StepExecutor& executor(bool training) { return training ? *executor_ : *eval_executor_; }

  // Micro-batches run by replaying a recording, over every build.
  long graph_replays() const;
  // Why recording failed in either executor (empty: it did not); capturing stops then, for the
  // executors built from now on too.
  std::string capture_failure() const;
  void stop_capturing();

 private:
  Network& net_;
  Backend& backend_;
  ParameterStore& params_;
  const BatchPlanner& planner_;
  memory::MemoryStack& stack_;
  StepSlots slots_;
  bool capture_;
  // Reserves the step memory of plans_ (built at micro_batch_) and makes the executors.
  void reserve();

  int micro_batch_ = 0;
  std::optional<std::size_t> arena_cap_;  // recompute_more's
  MicroBatchPlan plans_;
  memory::Buffer arena_;  // the planned strategy's
  std::unique_ptr<StepMemory> memory_, eval_memory_;
  std::unique_ptr<StepExecutor> executor_, eval_executor_;
  long replays_released_ = 0;  // by executors since released
};

}  // namespace cnn
