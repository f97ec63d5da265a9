#include <catch2/catch.hpp>

#include "block_tracker.hpp"
#include "memory/arena_resource.hpp"
#include "memory/fault_injection_adaptor.hpp"
#include "memory/host_resource.hpp"
#include <cnnengine/memory/out_of_memory.hpp>
#include "memory/statistics_adaptor.hpp"

using namespace cnn::memory;
using namespace cnn::memory::test;

TEST_CASE("statistics: current, peak and counts equal what was asked", "[memory]") {
  StatisticsAdaptor stats(host_resource());
  void* a = stats.allocate(1000, 64, Category::activations);
  void* b = stats.allocate(3000, 64, Category::workspace);
  void* c = stats.allocate(500, 64, Category::activations);
  stats.deallocate(b, 3000, 64, Category::workspace);
  void* d = stats.allocate(200, 64, Category::parameters);

  Statistics s = stats.statistics();
  CHECK(s.allocations == 4);
  CHECK(s.deallocations == 1);
  CHECK(s.live_blocks() == 3);
  CHECK(s.current_bytes == 1700);
  CHECK(s.peak_bytes == 4500);
  CHECK(s.allocated_bytes_total == 4700);
  CHECK(s.current_by_category[Category::activations] == 1500);
  CHECK(s.peak_by_category[Category::activations] == 1500);
  CHECK(s.peak_by_category[Category::workspace] == 3000);
  CHECK(s.current_by_category[Category::workspace] == 0);
  CHECK(s.current_by_category[Category::parameters] == 200);

  stats.reset_peak();
  s = stats.statistics();
  CHECK(s.peak_bytes == 1700);
  CHECK(s.peak_by_category[Category::workspace] == 0);

  for (auto [p, n] : {std::pair{a, 1000}, {c, 500}, {d, 200}})
    stats.deallocate(p, static_cast<std::size_t>(n), 64);
  CHECK(stats.statistics().current_bytes == 0);
  CHECK(stats.statistics().current_by_category.total() == 0);
}

TEST_CASE("statistics: agree with a random churn", "[memory]") {
  ArenaResource arena(host_resource(), 64 << 20);
  StatisticsAdaptor stats(arena);
  BlockTracker tracker(stats);
  ChurnOptions churn;
  churn.operations = 3000;
  const ChurnResult result = tracker.churn(17, churn);
  const Statistics s = stats.statistics();
  CHECK(s.allocations == result.allocations);
  CHECK(s.deallocations == result.deallocations);
  CHECK(s.peak_bytes == result.peak_bytes);
  CHECK(s.current_bytes == 0);
  CHECK(s.free_bytes == arena.capacity());  // the upstream's view, taken with the snapshot
  CHECK(s.largest_free_block == arena.capacity());
}

TEST_CASE("statistics: refused requests are counted apart", "[memory]") {
  FaultInjectionAdaptor faults(host_resource());
  StatisticsAdaptor stats(faults);
  faults.fail_next(2);
  CHECK_THROWS_AS(stats.allocate(100), OutOfMemory);
  CHECK_THROWS_AS(stats.allocate(100), OutOfMemory);
  void* p = stats.allocate(100);
  stats.deallocate(p, 100);
  const Statistics s = stats.statistics();
  CHECK(s.failed_allocations == 2);
  CHECK(s.allocations == 1);
  CHECK(s.peak_bytes == 100);
}
