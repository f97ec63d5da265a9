// While a trainer or a predictor plans, the backend's workspace queries take their scratch
// (CUDA: cuDNN's measurements) from the budget's memory, and after it from what they took it
// from before (Backend::set_query_memory).
#include <catch2/catch.hpp>

#include <cstddef>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "engine/core/forwarding_backend.hpp"
#include "engine/plan/batch_planner.hpp"
#include "engine/train/planning_options.hpp"
#include "memory/host_resource.hpp"
#include <cnnengine/engine/infer/predictor.hpp>
#include <cnnengine/engine/train/trainer.hpp>
#include <cnnengine/models/network_text.hpp>
#include "tests/engine/test_networks.hpp"

using namespace cnn;

namespace {

// The CPU backend, noting which memory each convolution's workspace query was told to take its
// scratch from.
class QueryMemoryWatch final : public ForwardingBackend {
 public:
  QueryMemoryWatch() : ForwardingBackend(cpu_), cpu_(1) {}

  memory::MemoryResource* set_query_memory(memory::MemoryResource* memory) override {
    return std::exchange(current_, memory);
  }
  memory::MemoryResource* current() const { return current_; }
  const std::vector<memory::MemoryResource*>& seen() const { return seen_; }

 protected:
  std::size_t do_conv2d_workspace_bytes(const Conv2dDesc& desc, const Shape& x, const Shape& y, ConvPass pass,
                                        std::size_t limit) override {
    seen_.push_back(current_);
    return ForwardingBackend::do_conv2d_workspace_bytes(desc, x, y, pass, limit);
  }

 private:
  CpuBackend cpu_;
  memory::MemoryResource* current_ = nullptr;
  std::vector<memory::MemoryResource*> seen_;
};

bool all_are(const std::vector<memory::MemoryResource*>& seen, memory::MemoryResource* memory) {
  for (memory::MemoryResource* m : seen)
    if (m != memory) return false;
  return !seen.empty();
}

const Shape kImage{1, 12, 12};

}  // namespace

TEST_CASE("a trainer plans with the backend's query scratch in its budget, then gives it back",
          "[plan][query_memory]") {
  QueryMemoryWatch backend;
  memory::MemoryResource& before = memory::host_resource();
  backend.set_query_memory(&before);
  Network net = make_preset("small", kImage, 4);
  TrainerOptions options = testing::constant_sgd(16);
  options.memory_budget = std::size_t{64} << 20;
  Trainer trainer(net, backend, memory::host_resource(), options);
  CHECK(all_are(backend.seen(), &trainer.memory_stack().blocks()));
  CHECK(backend.current() == &before);
}

TEST_CASE("a predictor plans with the backend's query scratch in its budget, then gives it back",
          "[plan][query_memory]") {
  QueryMemoryWatch backend;
  Network net = make_preset("small", kImage, 4);
  InferenceOptions options;
  options.max_batch = 8;
  options.account = memory::BudgetAccount(std::size_t{64} << 20);
  Predictor predictor(net, backend, memory::host_resource(), options);
  CHECK(all_are(backend.seen(), &predictor.memory_stack().blocks()));
  CHECK(backend.current() == nullptr);
}

TEST_CASE("a planner given no query memory leaves the backend's own", "[plan][query_memory]") {
  QueryMemoryWatch backend;
  Network net = make_preset("small", kImage, 4);
  const TrainerOptions options = testing::constant_sgd(16);
  const BatchPlanner planner(net, backend, planning_options(options, net, backend));
  planner.breakdown(4);
  CHECK(all_are(backend.seen(), nullptr));
}
