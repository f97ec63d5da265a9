// One battery run against every strategy, bare and under every adaptor.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <cnnengine/base/error.hpp>
#include "block_tracker.hpp"
#include <cnnengine/memory/out_of_memory.hpp>
#include "resource_stacks.hpp"

using namespace cnn::memory;
using namespace cnn::memory::test;

TEST_CASE("random allocate/free never overwrites a live block", "[memory]") {
  for (const auto& make : all_stacks()) {
    auto stack = make();
    INFO("resource stack: " << stack->name());
    BlockTracker tracker(stack->top());
    for (std::uint64_t seed : {1u, 2u, 3u}) {
      INFO("seed " << seed);
      ChurnOptions options;
      options.operations = 1500;
      ChurnResult result;
      REQUIRE_NOTHROW(result = tracker.churn(seed, options));
      CHECK(result.refused == 0);
      CHECK(result.allocations > 300);
      CHECK(result.deallocations == result.allocations);
    }
  }
}

TEST_CASE("every pointer honours its alignment", "[memory]") {
  const std::vector<std::size_t> sizes = {1, 100, 511, 512, 513, 4096, 70000, 1 << 20};
  for (const auto& make : all_stacks()) {
    auto stack = make();
    INFO("resource stack: " << stack->name());
    BlockTracker tracker(stack->top());
    for (std::size_t alignment = 1; alignment <= 4096; alignment *= 2)
      for (std::size_t bytes : sizes) {
        INFO("bytes " << bytes << " alignment " << alignment);
        REQUIRE_NOTHROW(tracker.allocate(bytes, alignment, Category::activations));
      }
    REQUIRE_NOTHROW(tracker.check_all());
    REQUIRE_NOTHROW(tracker.free_all());
  }
}

TEST_CASE("an alignment that is not a power of two up to 4096 is refused", "[memory]") {
  for (const auto& make : all_stacks()) {
    auto stack = make();
    INFO("resource stack: " << stack->name());
    CHECK_THROWS_AS(stack->top().allocate(64, 3), cnn::ConfigError);
    CHECK_THROWS_AS(stack->top().allocate(64, 8192), cnn::ConfigError);
    // A refused request leaves nothing behind: the whole budget and arena remain usable.
    BlockTracker tracker(stack->top());
    REQUIRE_NOTHROW(tracker.churn(7, ChurnOptions{300}));
  }
}

TEST_CASE("an impossible size is an OutOfMemory, not an overflow", "[memory]") {
  for (const auto& make : all_stacks()) {
    auto stack = make();
    INFO("resource stack: " << stack->name());
    // (Sizes near SIZE_MAX are checked on the pool and the arena alone: libstdc++'s aligned
    // operator new wraps them around, so the host upstream cannot be asked.)
    for (std::size_t bytes : {SIZE_MAX / 2 + 1, SIZE_MAX / 4 * 3})
      CHECK_THROWS_AS(stack->top().allocate(bytes), OutOfMemory);
    BlockTracker tracker(stack->top());
    REQUIRE_NOTHROW(tracker.churn(13, ChurnOptions{300}));
  }
}

TEST_CASE("a foreign pointer or a wrong size is a ConfigError, not corruption", "[memory]") {
  for (const auto& make : all_stacks()) {
    auto stack = make();
    INFO("resource stack: " << stack->name());
    MemoryResource& resource = stack->top();
    int not_from_here = 0;
    CHECK_THROWS_AS(resource.deallocate(&not_from_here, sizeof not_from_here), cnn::ConfigError);

    void* block = resource.allocate(1000);
    CHECK_THROWS_AS(resource.deallocate(block, 999), cnn::ConfigError);
    CHECK_THROWS_AS(resource.deallocate(static_cast<char*>(block) + 512, 488), cnn::ConfigError);
    REQUIRE_NOTHROW(resource.deallocate(block, 1000));
    CHECK_THROWS_AS(resource.deallocate(block, 1000), cnn::ConfigError);  // twice

    BlockTracker tracker(resource);
    REQUIRE_NOTHROW(tracker.churn(11, ChurnOptions{300}));
  }
}

TEST_CASE("several threads hammering one resource", "[memory]") {
  constexpr int kThreads = 4;
  for (const auto& make : all_stacks()) {
    auto stack = make();
    INFO("resource stack: " << stack->name());
    std::vector<std::string> errors(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        try {
          BlockTracker tracker(stack->top(), static_cast<std::uint8_t>(t * 61));
          ChurnOptions options;
          options.operations = 1500;
          options.live_cap = std::size_t{4} << 20;
          options.max_bytes = std::size_t{1} << 20;
          tracker.churn(100 + t, options);
        } catch (const std::exception& e) {
          errors[t] = e.what();
        }
      });
    }
    for (auto& thread : threads) thread.join();
    for (int t = 0; t < kThreads; ++t) {
      INFO("thread " << t);
      CHECK(errors[t].empty());
      CHECK(errors[t] == "");
    }
  }
}
