#include "engine/train/detail/step_resources.hpp"

#include <algorithm>

#include <cnnengine/memory/out_of_memory.hpp>

namespace cnn {

StepResources::StepResources(Network& network, Backend& backend, ParameterStore& params, const BatchPlanner& planner,
                             memory::MemoryStack& stack, StepSlots slots, bool capture)
    : net_(network), backend_(backend), params_(params), planner_(planner), stack_(stack), slots_(slots),
      capture_(capture) {}

long StepResources::graph_replays() const {
  long replays = replays_released_;
  if (executor_) replays += executor_->graph_replays();
  if (eval_executor_) replays += eval_executor_->graph_replays();
  return replays;
}

std::string StepResources::capture_failure() const {
  for (const StepExecutor* e : {executor_.get(), eval_executor_.get()})
    if (e && !e->capture_failure().empty()) return e->capture_failure();
  return {};
}

void StepResources::stop_capturing() {
  capture_ = false;
  if (executor_) executor_->stop_capturing();
  if (eval_executor_) eval_executor_->stop_capturing();
}

void StepResources::release() {
  // Work enqueued earlier (a step submitted without waiting) may still use this memory.
  if (built()) {
    try {
      backend_.synchronize();
    } catch (...) {  // a failed device: its error comes from the next call that checks
    }
  }
  replays_released_ = graph_replays();
  executor_.reset();
  eval_executor_.reset();
  memory_.reset();  // a dynamic step memory frees what a failed step still held
  eval_memory_.reset();
  arena_.release();
}

void StepResources::build(int micro_batch) {
  release();
  micro_batch_ = micro_batch;
  arena_cap_.reset();
  plans_ = plan_micro_batch(planner_, micro_batch);
  reserve();
}

bool StepResources::recompute_more() {
  if (planner_.options().recompute != RecomputePolicy::automatic) return false;
  release();
  const int b = micro_batch_;
  const std::size_t failed = plans_.breakdown.arena_bytes;
  if (failed == 0) return false;
  const std::size_t cap = std::min(planner_.breakdown(std::max(1, b / 2)).arena_bytes, failed - 1);
  MicroBatchPlan tighter =
      plan_micro_batch(planner_, b, planner_.workspace_limit(b), RecomputePolicy::automatic, cap);
  if (tighter.breakdown.arena_bytes > cap) return false;
  plans_ = std::move(tighter);
  try {
    reserve();
  } catch (const memory::OutOfMemory&) {
    return false;
  }
  arena_cap_ = cap;
  return true;
}

void StepResources::reserve() {
  try {
    if (memory::MemoryResource* buffers = stack_.step_buffers()) {
      memory_ = std::make_unique<DynamicStepMemory>(plans_.training, *buffers);
      eval_memory_ = std::make_unique<DynamicStepMemory>(plans_.inference, *buffers);
    } else {
      arena_ = memory::Buffer(stack_.blocks(), std::max(plans_.training.arena_bytes(), plans_.inference.arena_bytes()),
                              memory::Category::activations);
      memory_ = std::make_unique<PlannedStepMemory>(plans_.training, arena_.data());
      eval_memory_ = std::make_unique<PlannedStepMemory>(plans_.inference, arena_.data());
    }
    executor_ = std::make_unique<StepExecutor>(net_, backend_, params_, plans_.training, *memory_, slots_, capture_);
    eval_executor_ =
        std::make_unique<StepExecutor>(net_, backend_, params_, plans_.inference, *eval_memory_, slots_, capture_);
  } catch (...) {  // no half-built step: the next call builds again
    release();
    throw;
  }
}

std::string StepResources::cannot_reserve(int micro_batch) const {
  return "cannot reserve the step memory even at micro-batch " + std::to_string(micro_batch);
}

std::string StepResources::byte_table(int micro_batch) const {
  return format_memory_table(planner_.breakdown(micro_batch));
}

}  // namespace cnn
