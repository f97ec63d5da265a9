#pragma once
// The recovery and budget checks that run on every backend: the CPU tests
// (tests/engine/train/recovery_test.cpp) and the GPU tests (tests/backends/cuda/recovery_test.cpp) call them
// with their own backend and device memory.
#include <catch2/catch.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "memory/budget_adaptor.hpp"
#include "memory/fault_injection_adaptor.hpp"
#include <cnnengine/memory/memory_stack.hpp>
#include "memory/statistics_adaptor.hpp"
#include <cnnengine/models/network_text.hpp>
#include "step_buffers.hpp"
#include "test_networks.hpp"

namespace cnn::testing {

struct InjectedRun {
  std::vector<float> parameters;
  long samples = 0;
  std::size_t injected = 0;
  std::uint64_t requests = 0;  // allocation requests the step buffers saw
  int recoveries = 0;
};

// `steps` optimizer steps of `batch` samples of small_with_dropout on `backend`, its step
// buffers from the direct strategy over `device`, with `failures` allocation failures spread
// evenly over the first nine tenths of `clean_requests` requests (what a run without failures
// made: a backend makes its own number a step, about 25 at micro-batch 16 on the CPU, fewer on
// the GPU), each a random place in the first half of its share: never so many in a row that
// the micro-batch reaches 1, and all of them reached, since a failure only adds requests.
// Checks that nothing leaked.
inline InjectedRun run_with_injected_failures(Backend& backend, memory::MemoryResource& device, int failures,
                                              int batch, int steps, std::uint64_t clean_requests = 0) {
  const Shape image{1, 12, 12};
  const SyntheticData data(batch * steps, image, 4, 21);
  InjectedRun run;
  StepBufferStack buffers(device);
  std::set<std::uint64_t> chosen;
  if (failures > 0) {
    const std::uint64_t share = clean_requests * 9 / 10 / static_cast<std::uint64_t>(failures);
    REQUIRE(share >= 40);  // two steps or more between failures
    for (std::uint64_t i = 0; i < static_cast<std::uint64_t>(failures); ++i)
      chosen.insert(i * share + splitmix64(i) % (share / 2));
  }
  buffers.faults().fail_on(chosen);
  {
    Network net = small_with_dropout(image, 4);
    TrainerOptions o = constant_sgd(batch);
    Trainer trainer(net, backend, buffers.stack(), o);
    trainer.on_recovery = [&](const std::string&) { ++run.recoveries; };
    for (int s = 0; s < steps; ++s) run.samples += trainer.train_step(data.batch(s * batch, batch)).samples;
    run.parameters = trainer.parameters().download();
  }
  run.injected = buffers.faults().injected_failures();
  run.requests = buffers.faults().requests_seen();
  CHECK(buffers.step_buffers().current_bytes == 0);  // nothing leaked, failed steps included
  CHECK(buffers.step_buffers().live_blocks() == 0);
  buffers.stack().release_step_buffers();
  CHECK(buffers.stack().statistics().current_bytes == 0);
  return run;
}

// Budgets doubling from 16 KiB to `largest`, on the planned and the pool strategy: each run of
// 3 steps of small-bn at B = 64 trains within its budget or is refused before step 1, and some
// of each happen.
inline void check_budget_sweep(Backend& backend, memory::MemoryResource& device, std::size_t largest) {
  const Shape image{1, 12, 12};
  const SyntheticData data(64 * 3, image, 4, 8);
  int refused = 0, trained = 0;
  for (std::size_t budget = 16 * 1024; budget <= largest; budget *= 2)
    for (const memory::Strategy strategy : {memory::Strategy::planned, memory::Strategy::pool}) {
      memory::StatisticsAdaptor stats(device);
      memory::MemoryStack stack(stats, memory::MemoryOptions{budget, strategy});
      stack.settle_account(backend.library_reserved_bytes(), 0);
      memory::StatisticsAdaptor* step_buffers = nullptr;  // what the trainer took from the pool
      if (strategy == memory::Strategy::pool) {
        stack.build_step_buffers(0, 0);
        step_buffers = &static_cast<memory::StatisticsAdaptor&>(
            stack.wrap_step_buffers(std::make_unique<memory::StatisticsAdaptor>(*stack.step_buffers())));
      }
      TrainerOptions o = constant_sgd(64);
      Network net = make_preset("small-bn", image, 4);
      INFO(memory::to_string(strategy) << " under " << budget << " bytes");
      try {
        Trainer trainer(net, backend, stack, o);
        for (int s = 0; s < 3; ++s) {
          const StepReport r = trainer.train_step(data.batch(s * 64, 64));  // outside CHECK: it may throw
          CHECK(r.samples == 64);
        }
        backend.synchronize();
        ++trained;
      } catch (const BudgetTooSmall&) {
        CHECK(stats.statistics().allocations == 0);  // refused before anything was reserved
        ++refused;
      } catch (const memory::OutOfMemory& e) {
        // Only a framework-style strategy can fail inside a step: a pool grows by chunks of
        // 2 MiB at least and fragments, which the plan cannot foresee (on the CPU: at 2 MiB,
        // where planned trains). The planned strategy never does.
        CHECK(strategy == memory::Strategy::pool);
        CHECK(std::string(e.what()).find("micro-batch 1") != std::string::npos);
      }
      if (step_buffers) CHECK(step_buffers->statistics().current_bytes == 0);  // the trainer gave all back
      stack.release_step_buffers();  // a pool keeps its cache until it goes
      CHECK(stats.statistics().peak_bytes <= budget);
      CHECK(stats.statistics().current_bytes == 0);
    }
  CHECK(refused > 0);
  CHECK(trained > 0);
}

}  // namespace cnn::testing
