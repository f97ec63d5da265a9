#pragma once
// A memory stack whose step buffers come from a framework-style strategy with two adaptors of the
// test's over them: statistics (what the trainer holds in step buffers) and fault injection
// (failures that hit step buffers only, numbered over their requests). Give stack() to a Trainer.
#include <memory>

#include "memory/fault_injection_adaptor.hpp"
#include <cnnengine/memory/memory_stack.hpp>
#include "memory/statistics_adaptor.hpp"

namespace cnn::testing {

class StepBufferStack {
 public:
  explicit StepBufferStack(memory::MemoryResource& upstream, memory::Strategy strategy = memory::Strategy::direct,
                           std::size_t budget = 0, std::size_t outside = 0)
      : stack_(upstream, memory::MemoryOptions{budget, strategy}) {
    stack_.settle_account(outside, 0);
    stack_.build_step_buffers(0, 0);
    stats_ = &wrap<memory::StatisticsAdaptor>();
    faults_ = &wrap<memory::FaultInjectionAdaptor>();
  }

  memory::MemoryStack& stack() { return stack_; }
  memory::FaultInjectionAdaptor& faults() { return *faults_; }
  // Step buffers the trainer holds now, and has taken in all.
  memory::Statistics step_buffers() const { return stats_->statistics(); }

 private:
  template <class A>
  A& wrap() {
    return static_cast<A&>(stack_.wrap_step_buffers(std::make_unique<A>(*stack_.step_buffers())));
  }

  memory::MemoryStack stack_;
  memory::StatisticsAdaptor* stats_ = nullptr;
  memory::FaultInjectionAdaptor* faults_ = nullptr;
};

}  // namespace cnn::testing
