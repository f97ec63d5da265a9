#pragma once
// Where the buffers of a step live. The planned strategy binds every buffer to a fixed offset in
// one arena before step 1; a dynamic strategy allocates each buffer when its life begins and
// frees it after its last use, as a framework's allocator would (for the honest comparison).
#include <vector>

#include "engine/plan/detail/step_plan.hpp"
#include <cnnengine/memory/memory_resource.hpp>

namespace cnn {

class StepMemory {
 public:
  virtual ~StepMemory() = default;
  virtual void begin(int time) = 0;  // buffers first used at `time` become valid
  virtual void end(int time) = 0;    // buffers last used at `time` may go
  virtual void* address(int buffer) const = 0;
};

// One arena, offsets from the plan. begin/end do nothing: a step makes no allocation.
class PlannedStepMemory final : public StepMemory {
 public:
  PlannedStepMemory(const StepPlan& plan, void* arena) : plan_(plan), arena_(static_cast<char*>(arena)) {}
  void begin(int) override {}
  void end(int) override {}
  void* address(int buffer) const override { return arena_ + plan_.plan.offsets[static_cast<std::size_t>(buffer)]; }

 private:
  const StepPlan& plan_;
  char* arena_;
};

// Allocates from a strategy (direct, pool, arena) buffer by buffer, in the plan's order of use.
class DynamicStepMemory final : public StepMemory {
 public:
  DynamicStepMemory(const StepPlan& plan, memory::MemoryResource& resource);
  ~DynamicStepMemory() override;  // frees whatever is still held (after a failed step)
  void begin(int time) override;
  void end(int time) override;
  void* address(int buffer) const override { return addresses_[static_cast<std::size_t>(buffer)]; }

 private:
  void release(std::size_t buffer);
  const StepPlan& plan_;
  memory::MemoryResource& resource_;
  std::vector<void*> addresses_;
  std::vector<std::vector<int>> starting_, ending_;  // buffers by time
};

}  // namespace cnn
