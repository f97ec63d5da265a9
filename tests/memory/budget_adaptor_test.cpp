#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <cnnengine/base/error.hpp>
#include "block_tracker.hpp"
#include "memory/arena_resource.hpp"
#include "memory/budget_adaptor.hpp"
#include "memory/fault_injection_adaptor.hpp"
#include "memory/host_resource.hpp"
#include <cnnengine/memory/out_of_memory.hpp>
#include "memory/pool_resource.hpp"
#include "memory/statistics_adaptor.hpp"

using namespace cnn::memory;
using namespace cnn::memory::test;

namespace {
constexpr std::size_t KiB = 1024, MiB = 1024 * 1024;
}

TEST_CASE("budget: live bytes never exceed it, whatever the requests", "[memory]") {
  PoolResource pool(host_resource());
  StatisticsAdaptor below(pool);
  BudgetAdaptor budget(below, 6 * MiB);
  BlockTracker tracker(budget);
  ChurnOptions churn;
  churn.operations = 4000;
  churn.live_cap = 12 * MiB;  // the churn tries to go over
  churn.allow_out_of_memory = true;
  ChurnResult result;
  REQUIRE_NOTHROW(result = tracker.churn(9, churn));
  CHECK(result.refused > 0);
  CHECK(below.statistics().peak_bytes <= 6 * MiB);
  CHECK(budget.peak_bytes() <= 6 * MiB);
  CHECK(budget.peak_bytes() == below.statistics().peak_bytes);
  // Refused requests never reached the upstream.
  CHECK(below.statistics().failed_allocations == 0);
  CHECK(budget.in_use().total() == 0);
  CHECK(budget.headroom() == 6 * MiB);
}

TEST_CASE("budget: holds under several threads", "[memory]") {
  PoolResource pool(host_resource());
  StatisticsAdaptor below(pool);
  BudgetAdaptor budget(below, 4 * MiB);
  std::vector<std::string> errors(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      try {
        BlockTracker tracker(budget, static_cast<std::uint8_t>(t * 61));
        ChurnOptions churn;
        churn.operations = 2000;
        churn.live_cap = 3 * MiB;
        churn.max_bytes = 1 * MiB;
        churn.allow_out_of_memory = true;
        tracker.churn(200 + t, churn);
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  for (auto& thread : threads) thread.join();
  for (const auto& error : errors) CHECK(error == "");
  CHECK(below.statistics().peak_bytes <= 4 * MiB);
  CHECK(budget.in_use().total() == 0);
}

TEST_CASE("budget: the OutOfMemory carries request, limit, usage by category and fragmentation",
          "[memory]") {
  ArenaResource arena(host_resource(), 4 * MiB);
  BudgetAdaptor budget(arena, 3 * MiB);
  void* a = budget.allocate(1 * MiB, 256, Category::activations);
  void* b = budget.allocate(1 * MiB, 256, Category::workspace);
  void* c = budget.allocate(1 * MiB, 256, Category::parameters);
  budget.deallocate(b, 1 * MiB, 256, Category::workspace);  // arena: a 1 MiB hole + 1 MiB tail
  try {
    budget.allocate(1536 * KiB, 256, Category::workspace);
    FAIL("expected OutOfMemory");
  } catch (const OutOfMemory& e) {
    const auto& d = e.details();
    CHECK(d.requested == 1536 * KiB);
    CHECK(d.category == Category::workspace);
    CHECK(d.limit == 3 * MiB);
    CHECK(d.in_use[Category::activations] == 1 * MiB);
    CHECK(d.in_use[Category::parameters] == 1 * MiB);
    CHECK(d.in_use[Category::workspace] == 0);
    CHECK(d.largest_free_block == 1 * MiB);
    CHECK(d.total_free == 2 * MiB);
    const std::string message = e.what();
    INFO(message);
    CHECK(message.find("asked for 1.50 MiB of workspace") != std::string::npos);
    CHECK(message.find("limit of 3.00 MiB") != std::string::npos);
    CHECK(message.find("activations 1.00 MiB") != std::string::npos);
    CHECK(message.find("largest free block 1.00 MiB") != std::string::npos);
    CHECK(message.find("fragmentation 50%") != std::string::npos);
  }
  // What fits the budget still passes.
  void* d = budget.allocate(1 * MiB, 256, Category::workspace);
  CHECK(budget.headroom() == 0);
  CHECK_THROWS_AS(budget.allocate(1), OutOfMemory);
  for (void* p : {a, c, d}) budget.deallocate(p, 1 * MiB);
  CHECK(budget.headroom() == 3 * MiB);
}

TEST_CASE("budget: a smaller budget refuses until enough is freed", "[memory]") {
  BudgetAdaptor budget(host_resource(), 4 * MiB);
  void* a = budget.allocate(3 * MiB);
  budget.set_budget(2 * MiB);  // e.g. another process took memory
  CHECK_THROWS_AS(budget.allocate(1), OutOfMemory);
  CHECK(budget.headroom() == 0);
  budget.deallocate(a, 3 * MiB);
  void* b = budget.allocate(2 * MiB);
  budget.deallocate(b, 2 * MiB);
}

TEST_CASE("budget: a request the upstream refuses is not counted, in use or at the peak", "[memory]") {
  FaultInjectionAdaptor faults(host_resource());
  BudgetAdaptor budget(faults, 4 * MiB);
  void* a = budget.allocate(1 * MiB);
  faults.fail_next(1);
  CHECK_THROWS_AS(budget.allocate(2 * MiB), OutOfMemory);
  CHECK(budget.in_use().total() == 1 * MiB);
  CHECK(budget.peak_bytes() == 1 * MiB);
  budget.deallocate(a, 1 * MiB);
}

TEST_CASE("budget: free space reported through it is cut to the headroom", "[memory]") {
  ArenaResource arena(host_resource(), 8 * MiB);
  BudgetAdaptor budget(arena, 2 * MiB);
  CHECK(budget.largest_free_block() == 2 * MiB);
  CHECK(budget.free_bytes() == 2 * MiB);
  BudgetAdaptor over_host(host_resource(), 2 * MiB);
  CHECK(over_host.largest_free_block() == 0);  // the host cannot tell
}

TEST_CASE("two adaptors sharing a budget are capped together, each taking back its own blocks", "[memory]") {
  StatisticsAdaptor device(host_resource()), staging(host_resource());
  BudgetAdaptor on_device(device, 8 * MiB);
  BudgetAdaptor on_staging(staging, on_device);
  void* a = on_device.allocate(5 * MiB);
  CHECK_THROWS_AS(on_staging.allocate(4 * MiB, kDefaultAlignment, Category::data_staging), OutOfMemory);
  void* b = on_staging.allocate(3 * MiB, kDefaultAlignment, Category::data_staging);
  CHECK(on_device.headroom() == 0);
  CHECK(on_staging.in_use()[Category::data_staging] == 3 * MiB);
  CHECK(on_device.peak_bytes() == 8 * MiB);
  CHECK_THROWS_AS(on_device.deallocate(b, 3 * MiB), cnn::ConfigError);  // not its block
  on_staging.deallocate(b, 3 * MiB, kDefaultAlignment, Category::data_staging);
  CHECK(staging.statistics().current_bytes == 0);
  CHECK(on_staging.headroom() == 3 * MiB);
  on_device.deallocate(a, 5 * MiB);
}
