#include "engine/train/detail/step_memory.hpp"

#include "memory/buffer.hpp"

namespace cnn {

DynamicStepMemory::DynamicStepMemory(const StepPlan& plan, memory::MemoryResource& resource)
    : plan_(plan), resource_(resource), addresses_(plan.requests.size(), nullptr) {
  starting_.resize(static_cast<std::size_t>(plan.time_steps));
  ending_.resize(static_cast<std::size_t>(plan.time_steps));
  for (std::size_t i = 0; i < plan.requests.size(); ++i) {
    starting_[static_cast<std::size_t>(plan.requests[i].first_use)].push_back(static_cast<int>(i));
    ending_[static_cast<std::size_t>(plan.requests[i].last_use)].push_back(static_cast<int>(i));
  }
}

DynamicStepMemory::~DynamicStepMemory() {
  for (std::size_t i = 0; i < addresses_.size(); ++i) release(i);
}

void DynamicStepMemory::begin(int time) {
  for (int i : starting_[static_cast<std::size_t>(time)]) {
    const auto& r = plan_.requests[static_cast<std::size_t>(i)];
    addresses_[static_cast<std::size_t>(i)] = resource_.allocate(r.bytes, memory::kDefaultAlignment, r.category);
  }
}

void DynamicStepMemory::end(int time) {
  for (int i : ending_[static_cast<std::size_t>(time)]) release(static_cast<std::size_t>(i));
}

void DynamicStepMemory::release(std::size_t i) {
  if (!addresses_[i]) return;
  const auto& r = plan_.requests[i];
  memory::give_back(resource_, addresses_[i], r.bytes, memory::kDefaultAlignment, r.category);
  addresses_[i] = nullptr;
}

}  // namespace cnn
