#include <catch2/catch.hpp>

#include <cstdint>

#include "block_tracker.hpp"
#include "memory/budget_adaptor.hpp"
#include "memory/host_resource.hpp"
#include <cnnengine/memory/out_of_memory.hpp>
#include "memory/pool_resource.hpp"
#include "memory/statistics_adaptor.hpp"
#include "page_offset_upstream.hpp"

using namespace cnn::memory;
using namespace cnn::memory::test;

namespace {
constexpr std::size_t KiB = 1024, MiB = 1024 * 1024;
}

TEST_CASE("pool: requests round to 512-byte classes and chunks follow the growth rules",
          "[memory]") {
  StatisticsAdaptor upstream(host_resource());
  PoolResource pool(upstream);  // growth 2 MiB, small <= 1 MiB, large chunks of 20 MiB

  void* small = pool.allocate(100);
  CHECK(pool.reserved_bytes() == 2 * MiB);  // one small chunk
  CHECK(pool.free_bytes() == 2 * MiB - 512);

  void* mid = pool.allocate(3 * MiB);  // large, below 10 MiB: a 20 MiB chunk
  CHECK(pool.reserved_bytes() == 22 * MiB);
  void* mid2 = pool.allocate(3 * MiB);  // served from the same chunk
  CHECK(pool.reserved_bytes() == 22 * MiB);

  void* big = pool.allocate(30 * MiB + 1);  // rounded up to a multiple of the growth
  CHECK(pool.reserved_bytes() == 22 * MiB + 32 * MiB);

  // The adaptor under the pool counts exactly the pool's upstream calls.
  CHECK(upstream.statistics().allocations == 3);
  CHECK(pool.stats().upstream_allocations == 3);
  CHECK(upstream.statistics().current_bytes == pool.reserved_bytes());

  for (auto [p, n] : {std::pair{small, std::size_t{100}}, {mid, 3 * MiB}, {mid2, 3 * MiB},
                      {big, 30 * MiB + 1}})
    pool.deallocate(p, n);
  // Nothing goes back to the upstream until release().
  CHECK(upstream.statistics().deallocations == 0);
  CHECK(pool.free_bytes() == pool.reserved_bytes());
}

TEST_CASE("pool: a freed block is reused best-fit before the pool grows", "[memory]") {
  PoolResource pool(host_resource());
  void* a = pool.allocate(64 * KiB);
  void* b = pool.allocate(128 * KiB);
  void* c = pool.allocate(64 * KiB);
  void* d = pool.allocate(256 * KiB);
  void* e = pool.allocate(64 * KiB);
  pool.deallocate(d, 256 * KiB);  // a 256 KiB hole
  pool.deallocate(b, 128 * KiB);  // a 128 KiB hole
  const std::size_t reserved = pool.reserved_bytes();
  CHECK(pool.allocate(100 * KiB) == b);  // the smaller hole that fits
  CHECK(pool.allocate(200 * KiB) == d);
  CHECK(pool.reserved_bytes() == reserved);
  pool.deallocate(b, 100 * KiB);
  pool.deallocate(d, 200 * KiB);
  for (void* p : {a, c, e}) pool.deallocate(p, 64 * KiB);
  CHECK(pool.stats().free_blocks == pool.stats().chunks);
}

TEST_CASE("pool: after churn and a full free, each chunk is one free block again", "[memory]") {
  StatisticsAdaptor upstream(host_resource());
  for (PoolOptions options : {PoolOptions{}, PoolOptions{64 * KiB, 8 * KiB, 256 * KiB}}) {
    PoolResource pool(upstream, options);
    BlockTracker tracker(pool);
    ChurnOptions churn;
    churn.operations = 3000;
    REQUIRE_NOTHROW(tracker.churn(42, churn));

    const PoolStats stats = pool.stats();
    INFO("growth " << options.growth << ", chunks " << stats.chunks);
    CHECK(stats.live_blocks == 0);
    CHECK(stats.free_blocks == stats.chunks);
    CHECK(stats.free_bytes == stats.reserved_bytes);
    CHECK(stats.in_use.total() == 0);

    // The largest free block is a whole chunk and one request of that size needs no growth.
    const std::size_t largest = pool.largest_free_block();
    CHECK(largest > options.small_limit);
    const std::size_t calls = upstream.statistics().allocations;
    void* whole = pool.allocate(largest);
    CHECK(upstream.statistics().allocations == calls);
    pool.deallocate(whole, largest);
  }
  CHECK(upstream.statistics().current_bytes == 0);  // destruction returned every chunk
}

TEST_CASE("pool: one large chunk serves its whole capacity after churn", "[memory]") {
  // Every request is "large" and the first chunk holds all of them.
  PoolResource pool(host_resource(), PoolOptions{64 * MiB, 0, 64 * MiB});
  BlockTracker tracker(pool);
  ChurnOptions churn;
  churn.operations = 3000;
  REQUIRE_NOTHROW(tracker.churn(5, churn));
  REQUIRE(pool.stats().chunks == 1);
  CHECK(pool.largest_free_block() == 64 * MiB);
  void* whole = pool.allocate(64 * MiB);
  CHECK(pool.stats().chunks == 1);
  pool.deallocate(whole, 64 * MiB);
}

TEST_CASE("pool: release() returns only the chunks with no live block", "[memory]") {
  StatisticsAdaptor upstream(host_resource());
  PoolResource pool(upstream);
  void* keep = pool.allocate(4 * MiB);
  void* drop = pool.allocate(40 * MiB);
  void* small = pool.allocate(1000);
  pool.deallocate(drop, 40 * MiB);
  pool.deallocate(small, 1000);
  pool.release();
  CHECK(pool.reserved_bytes() == 20 * MiB);  // the chunk that holds `keep`
  CHECK(upstream.statistics().current_bytes == 20 * MiB);
  CHECK(upstream.statistics().deallocations == 2);
  pool.deallocate(keep, 4 * MiB);
  pool.release();
  CHECK(pool.reserved_bytes() == 0);
  CHECK(upstream.statistics().current_bytes == 0);
}

TEST_CASE("pool: an upstream refusal becomes the pool's OutOfMemory with its free space",
          "[memory]") {
  BudgetAdaptor device(host_resource(), 24 * MiB);  // a small simulated device
  PoolResource pool(device);
  void* a = pool.allocate(3 * MiB);  // takes a 20 MiB chunk
  try {
    pool.allocate(18 * MiB, 256, Category::workspace);
    FAIL("expected OutOfMemory");
  } catch (const OutOfMemory& e) {
    const std::string message = e.what();
    INFO(message);
    CHECK(e.details().requested == 18 * MiB);
    CHECK(e.details().category == Category::workspace);
    CHECK(e.details().total_free == 17 * MiB);
    CHECK(e.details().largest_free_block == 17 * MiB);
    CHECK(e.details().in_use[Category::other] == 3 * MiB);
    CHECK(message.find("refused a new chunk of 18.00 MiB") != std::string::npos);
    CHECK(message.find("workspace") != std::string::npos);
  }
  // Still usable afterwards: the free space inside the chunk serves a fitting request.
  void* b = pool.allocate(17 * MiB);
  pool.deallocate(b, 17 * MiB);
  pool.deallocate(a, 3 * MiB);
}

TEST_CASE("pool: when the upstream refuses the usual chunk, a chunk of just the request", "[memory]") {
  StatisticsAdaptor counted(host_resource());
  BudgetAdaptor device(counted, 8 * MiB);
  PoolResource pool(device);
  void* a = pool.allocate(3 * MiB);  // a 20 MiB chunk would not fit: 4 MiB (the growth's multiple)
  CHECK(pool.reserved_bytes() == 4 * MiB);
  void* b = pool.allocate(3 * MiB);  // and again
  CHECK(pool.reserved_bytes() == 8 * MiB);
  CHECK_THROWS_AS(pool.allocate(1 * MiB + 1), OutOfMemory);  // the device is full
  pool.deallocate(a, 3 * MiB);
  pool.deallocate(b, 3 * MiB);
  CHECK(counted.statistics().current_bytes == 8 * MiB);
}

TEST_CASE("pool: when the upstream refuses, the empty cached chunks go back and it asks again", "[memory]") {
  StatisticsAdaptor counted(host_resource());
  BudgetAdaptor device(counted, 24 * MiB);
  PoolResource pool(device);
  void* small = pool.allocate(100);       // a 2 MiB small chunk, kept live
  void* mid = pool.allocate(3 * MiB);     // a 20 MiB chunk
  pool.deallocate(mid, 3 * MiB);          // cached, empty
  void* big = pool.allocate(21 * MiB);    // needs 22 MiB: only once the empty chunk is given back
  CHECK(pool.reserved_bytes() == 2 * MiB + 22 * MiB);
  CHECK(pool.stats().chunks == 2);
  pool.deallocate(big, 21 * MiB);
  pool.deallocate(small, 100);
  CHECK(counted.statistics().current_bytes <= 24 * MiB);
}

TEST_CASE("pool: sizes near SIZE_MAX are refused before any rounding can wrap", "[memory]") {
  StatisticsAdaptor upstream(host_resource());
  PoolResource pool(upstream);
  for (std::size_t bytes : {SIZE_MAX, SIZE_MAX - 100, SIZE_MAX - 600, SIZE_MAX / 2})
    CHECK_THROWS_AS(pool.allocate(bytes), OutOfMemory);
  CHECK(upstream.statistics().allocations == 0);
}

TEST_CASE("pool: over a 256-aligned upstream, a 4096-aligned request still fits a new chunk",
          "[memory]") {
  PageOffsetUpstream upstream(256);
  PoolResource pool(upstream, PoolOptions{4 * KiB, 4 * KiB, 4 * KiB});
  for (std::size_t bytes : {std::size_t{4096}, std::size_t{100}, 64 * KiB}) {
    void* p = pool.allocate(bytes, 4096);
    CHECK(reinterpret_cast<std::uintptr_t>(p) % 4096 == 0);
    pool.deallocate(p, bytes);
  }
  CHECK(pool.stats().free_blocks == pool.stats().chunks);
}

TEST_CASE("pool: destruction returns every chunk, live blocks or not", "[memory]") {
  StatisticsAdaptor upstream(host_resource());
  {
    PoolResource pool(upstream);
    pool.allocate(100);
    pool.allocate(5 * MiB);
    CHECK(upstream.statistics().current_bytes > 0);
  }
  CHECK(upstream.statistics().current_bytes == 0);
  CHECK(upstream.statistics().live_blocks() == 0);
}
