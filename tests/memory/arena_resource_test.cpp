#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include <cnnengine/base/error.hpp>
#include "block_tracker.hpp"
#include "memory/arena_resource.hpp"
#include "memory/host_resource.hpp"
#include <cnnengine/memory/out_of_memory.hpp>
#include "memory/statistics_adaptor.hpp"
#include "page_offset_upstream.hpp"

using namespace cnn::memory;
using namespace cnn::memory::test;

namespace {
constexpr std::size_t KiB = 1024, MiB = 1024 * 1024;
}

TEST_CASE("arena: one upstream reservation in the constructor, never more", "[memory]") {
  StatisticsAdaptor upstream(host_resource());
  {
    ArenaResource arena(upstream, 8 * MiB + 1, Category::activations);
    CHECK(arena.capacity() == 8 * MiB + 512);
    CHECK(upstream.statistics().allocations == 1);
    CHECK(upstream.statistics().current_by_category[Category::activations] == 8 * MiB + 512);
    BlockTracker tracker(arena);
    ChurnOptions churn;
    churn.live_cap = 6 * MiB;
    churn.allow_out_of_memory = true;
    REQUIRE_NOTHROW(tracker.churn(3, churn));
    CHECK(upstream.statistics().allocations == 1);
  }
  CHECK(upstream.statistics().current_bytes == 0);
  CHECK_THROWS_AS(ArenaResource(host_resource(), 0), cnn::ConfigError);
}

TEST_CASE("arena: best fit picks the smallest hole that holds the request", "[memory]") {
  ArenaResource arena(host_resource(), 1 * MiB);
  // Live blocks between the holes keep them apart (the arena frees them at destruction).
  arena.allocate(8 * KiB);
  void* b = arena.allocate(16 * KiB);  // becomes a 16 KiB hole
  arena.allocate(8 * KiB);
  void* d = arena.allocate(4 * KiB);   // becomes a 4 KiB hole
  arena.allocate(8 * KiB);
  arena.deallocate(b, 16 * KiB);
  arena.deallocate(d, 4 * KiB);
  CHECK(arena.allocate(3 * KiB) == d);
  CHECK(arena.allocate(10 * KiB) == b);
  // The split remainder of b's hole (6 KiB) serves the next small request.
  CHECK(arena.allocate(5 * KiB) == static_cast<char*>(b) + 10 * KiB);
}

TEST_CASE("arena: after churn and a full free, one request of the whole capacity fits",
          "[memory]") {
  ArenaResource arena(host_resource(), 32 * MiB);
  for (std::uint64_t seed : {1u, 2u, 3u, 4u}) {
    BlockTracker tracker(arena);
    ChurnOptions churn;
    churn.operations = 3000;
    churn.live_cap = 16 * MiB;
    churn.allow_out_of_memory = true;
    REQUIRE_NOTHROW(tracker.churn(seed, churn));
    CHECK(arena.free_bytes() == arena.capacity());
    CHECK(arena.largest_free_block() == arena.capacity());
    CHECK(arena.in_use().total() == 0);
    void* whole = arena.allocate(arena.capacity());
    arena.deallocate(whole, arena.capacity());
  }
}

TEST_CASE("arena: a request that does not fit says how much is free and how fragmented",
          "[memory]") {
  ArenaResource arena(host_resource(), 1 * MiB);
  void* blocks[4];
  for (auto& b : blocks) b = arena.allocate(256 * KiB, 256, Category::activations);
  arena.deallocate(blocks[0], 256 * KiB);
  arena.deallocate(blocks[2], 256 * KiB);
  try {
    arena.allocate(300 * KiB, 256, Category::workspace);
    FAIL("expected OutOfMemory");
  } catch (const OutOfMemory& e) {
    const auto& d = e.details();
    CHECK(d.requested == 300 * KiB);
    CHECK(d.category == Category::workspace);
    CHECK(d.limit == 1 * MiB);
    CHECK(d.largest_free_block == 256 * KiB);
    CHECK(d.total_free == 512 * KiB);
    CHECK(d.in_use[Category::activations] == 512 * KiB);
    CHECK(d.fragmentation() == Approx(0.5));
    const std::string message = e.what();
    INFO(message);
    CHECK(message.find("300.00 KiB") != std::string::npos);
    CHECK(message.find("fragmentation 50%") != std::string::npos);
  }
  // Freeing the middle block merges three neighbours into one: now it fits.
  arena.deallocate(blocks[1], 256 * KiB);
  CHECK(arena.largest_free_block() == 768 * KiB);
  void* fits = arena.allocate(700 * KiB);
  arena.deallocate(fits, 700 * KiB);
  arena.deallocate(blocks[3], 256 * KiB);
}

TEST_CASE("arena: sizes near SIZE_MAX are refused before any rounding can wrap", "[memory]") {
  ArenaResource arena(host_resource(), 1 * MiB);
  for (std::size_t bytes : {SIZE_MAX, SIZE_MAX - 100, SIZE_MAX - 600})
    CHECK_THROWS_AS(arena.allocate(bytes, 4096), OutOfMemory);
  CHECK(arena.free_bytes() == 1 * MiB);
}

TEST_CASE("arena: large alignments leave their padding usable", "[memory]") {
  SECTION("page-aligned base: the layout is exact") {
    PageOffsetUpstream upstream(0);
    ArenaResource arena(upstream, 64 * KiB);
    void* small = arena.allocate(512, 512);
    void* page = arena.allocate(4096, 4096);  // leaves a 3.5 KiB free gap in front
    CHECK(page == static_cast<char*>(small) + 4096);
    CHECK(arena.free_bytes() == 64 * KiB - 512 - 4096);
    void* gap = arena.allocate(3 * KiB, 512);
    CHECK(gap == static_cast<char*>(small) + 512);
    for (auto [p, n] : {std::pair{small, 512}, {page, 4096}, {gap, 3 * 1024}})
      arena.deallocate(p, static_cast<std::size_t>(n));
    CHECK(arena.largest_free_block() == 64 * KiB);
  }
  SECTION("a base only 256-aligned, as cudaMalloc promises") {
    PageOffsetUpstream upstream(256);
    ArenaResource arena(upstream, 64 * KiB);
    void* page = arena.allocate(4096, 4096);
    CHECK(reinterpret_cast<std::uintptr_t>(page) % 4096 == 0);
    CHECK(arena.free_bytes() == 64 * KiB - 4096);
    void* front = arena.allocate(3 * KiB);  // best fit: the 3.75 KiB padding in front
    CHECK(front < page);
    for (std::size_t alignment = 1; alignment <= 4096; alignment *= 2) {
      void* p = arena.allocate(1000, alignment);
      CHECK(reinterpret_cast<std::uintptr_t>(p) % alignment == 0);
      arena.deallocate(p, 1000);
    }
    arena.deallocate(front, 3 * KiB);
    arena.deallocate(page, 4096);
    CHECK(arena.largest_free_block() == 64 * KiB);
    void* whole = arena.allocate(64 * KiB);
    arena.deallocate(whole, 64 * KiB);
  }
}
