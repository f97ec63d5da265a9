// Property tests of the step planner on random and constructed buffer sets.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <vector>

#include <cnnengine/base/error.hpp>
#include "memory/detail/planner.hpp"
#include <cnnengine/memory/memory_resource.hpp>

using namespace cnn::memory;

namespace {

std::vector<BufferRequest> random_buffers(std::mt19937_64& rng) {
  const int count = std::uniform_int_distribution<int>(1, 40)(rng);
  const int horizon = std::uniform_int_distribution<int>(1, 60)(rng);
  std::vector<BufferRequest> buffers;
  for (int i = 0; i < count; ++i) {
    BufferRequest b;
    b.name = "b" + std::to_string(i);
    b.bytes = std::uniform_int_distribution<std::size_t>(0, 1 << 20)(rng);
    b.first_use = std::uniform_int_distribution<int>(0, horizon)(rng);
    b.last_use = b.first_use + std::uniform_int_distribution<int>(0, horizon / 2)(rng);
    b.category = static_cast<Category>(std::uniform_int_distribution<int>(0, 6)(rng));
    buffers.push_back(b);
  }
  return buffers;
}

std::size_t aligned_size(const BufferRequest& b, std::size_t alignment) {
  return align_up(std::max<std::size_t>(b.bytes, 1), alignment);
}

// Checked here, independently of plan_is_valid: no two buffers live at one time share a byte.
bool no_overlap(const std::vector<BufferRequest>& buffers, const Plan& plan) {
  for (std::size_t i = 0; i < buffers.size(); ++i)
    for (std::size_t j = i + 1; j < buffers.size(); ++j) {
      const bool same_time = buffers[i].first_use <= buffers[j].last_use &&
                             buffers[j].first_use <= buffers[i].last_use;
      const std::size_t ei = plan.offsets[i] + aligned_size(buffers[i], plan.alignment);
      const std::size_t ej = plan.offsets[j] + aligned_size(buffers[j], plan.alignment);
      if (same_time && plan.offsets[i] < ej && plan.offsets[j] < ei) return false;
    }
  return true;
}

std::size_t live_peak(const std::vector<BufferRequest>& buffers, std::size_t alignment) {
  std::size_t peak = 0;
  for (int t = 0; t <= 200; ++t) {
    std::size_t live = 0;
    for (const auto& b : buffers)
      if (b.first_use <= t && t <= b.last_use) live += aligned_size(b, alignment);
    peak = std::max(peak, live);
  }
  return peak;
}

}  // namespace

TEST_CASE("planner: random buffer sets get valid, aligned, deterministic plans", "[memory]") {
  std::mt19937_64 rng(2024);
  for (int trial = 0; trial < 300; ++trial) {
    const auto buffers = random_buffers(rng);
    const std::size_t alignment = std::size_t{64} << (trial % 7);  // 64 .. 4096
    INFO("trial " << trial << ", " << buffers.size() << " buffers, alignment " << alignment);
    const Plan plan = plan_offsets(buffers, alignment);
    REQUIRE(plan.offsets.size() == buffers.size());
    CHECK(plan_is_valid(buffers, plan));
    CHECK(no_overlap(buffers, plan));
    for (std::size_t i = 0; i < buffers.size(); ++i) {
      CHECK(plan.offsets[i] % alignment == 0);
      CHECK(plan.offsets[i] + aligned_size(buffers[i], alignment) <= plan.arena_bytes);
    }
    CHECK(plan.lower_bound_bytes == live_peak(buffers, alignment));
    CHECK(plan.arena_bytes >= plan.lower_bound_bytes);
    CHECK(plan.peak_by_category.total() == plan.lower_bound_bytes);
    const Plan again = plan_offsets(buffers, alignment);
    CHECK(again.offsets == plan.offsets);
    CHECK(again.arena_bytes == plan.arena_bytes);
  }
}

TEST_CASE("planner: disjoint lifetimes share one slot and meet the lower bound", "[memory]") {
  std::vector<BufferRequest> buffers;
  for (int t = 0; t < 10; ++t)
    buffers.push_back({"step" + std::to_string(t), std::size_t(1000 + 700 * ((t * 7) % 10)), t, t});
  const Plan plan = plan_offsets(buffers, 256);
  CHECK(plan_is_valid(buffers, plan));
  for (std::size_t offset : plan.offsets) CHECK(offset == 0);
  CHECK(plan.arena_bytes == plan.lower_bound_bytes);
  CHECK(plan.arena_bytes == align_up(1000 + 700 * 9, 256));
}

TEST_CASE("planner: nested lifetimes (forward then backward) need their sum", "[memory]") {
  // Activation i is written at step i of the forward pass and last read at step 2n-i of
  // the backward pass: all of them are live at the turn.
  constexpr int n = 8;
  std::vector<BufferRequest> buffers;
  for (int i = 0; i < n; ++i)
    buffers.push_back({"act" + std::to_string(i), std::size_t(4096 * (i + 1)), i, 2 * n - i});
  const Plan plan = plan_offsets(buffers, 256);
  CHECK(plan_is_valid(buffers, plan));
  CHECK(plan.lower_bound_bytes == 4096 * (n * (n + 1) / 2));
  CHECK(plan.arena_bytes == plan.lower_bound_bytes);
}

TEST_CASE("planner: an interval graph of equal buffers needs only its largest clique",
          "[memory]") {
  // Buffer i lives over [i, i+2]: at most three overlap at any step, so three slots suffice.
  std::vector<BufferRequest> buffers;
  for (int i = 0; i < 20; ++i) buffers.push_back({"b" + std::to_string(i), 1 << 16, i, i + 2});
  const Plan plan = plan_offsets(buffers, 256);
  CHECK(plan_is_valid(buffers, plan));
  CHECK(plan.lower_bound_bytes == 3 << 16);
  CHECK(plan.arena_bytes == plan.lower_bound_bytes);
  for (std::size_t i = 0; i + 3 < buffers.size(); ++i)  // slots are reused every third buffer
    CHECK(plan.offsets[i] == plan.offsets[i + 3]);
}

TEST_CASE("planner: a mixed interval graph stays valid and near its bound", "[memory]") {
  // A residual block's shape: a long-lived skip buffer beside a chain of short-lived ones.
  std::vector<BufferRequest> buffers = {
      {"skip", 3 << 20, 0, 9},     {"conv1", 2 << 20, 1, 3},  {"relu1", 2 << 20, 3, 5},
      {"conv2", 1 << 20, 5, 7},    {"sum", 3 << 20, 8, 10},   {"grad", 1 << 20, 9, 12},
      {"workspace", 512 << 10, 2, 2}, {"workspace2", 512 << 10, 6, 6}};
  const Plan plan = plan_offsets(buffers, 256);
  CHECK(plan_is_valid(buffers, plan));
  CHECK(no_overlap(buffers, plan));
  CHECK(plan.arena_bytes >= plan.lower_bound_bytes);
  CHECK(plan.overhead() <= 1.5);
}

TEST_CASE("planner: empty input and a reversed lifetime", "[memory]") {
  const Plan empty = plan_offsets({}, 256);
  CHECK(empty.arena_bytes == 0);
  CHECK(empty.lower_bound_bytes == 0);
  CHECK(plan_is_valid({}, empty));
  CHECK_THROWS_AS(plan_offsets({{"bad", 64, 5, 4}}, 256), cnn::ConfigError);
  // A plan that is tampered with is caught.
  std::vector<BufferRequest> two = {{"a", 1024, 0, 1}, {"b", 1024, 1, 2}};
  Plan plan = plan_offsets(two, 256);
  REQUIRE(plan_is_valid(two, plan));
  plan.offsets[1] = plan.offsets[0];
  CHECK_FALSE(plan_is_valid(two, plan));
}

TEST_CASE("planner: beyond 2048 buffers, time order: still valid, within a little of the lower bound", "[planner]") {
  // Note [Two placement algorithms] (planner.cpp): large plans are simulated in time order.
  std::mt19937_64 rng(17);
  for (int round = 0; round < 3; ++round) {
    std::vector<BufferRequest> buffers;
    const int horizon = 2000;
    for (int i = 0; i < 3000; ++i) {
      BufferRequest b;
      b.name = "b" + std::to_string(i);
      b.bytes = std::uniform_int_distribution<std::size_t>(1, 1 << 16)(rng);
      b.first_use = std::uniform_int_distribution<int>(0, horizon)(rng);
      b.last_use = b.first_use + std::uniform_int_distribution<int>(0, 30)(rng);
      buffers.push_back(b);
    }
    const Plan plan = plan_offsets(buffers, 256);
    CHECK(plan_is_valid(buffers, plan));
    CHECK(no_overlap(buffers, plan));
    std::size_t peak = 0;  // the lower bound, computed here the slow way
    for (int t = 0; t <= horizon + 30; ++t) {
      std::size_t live = 0;
      for (const auto& b : buffers)
        if (b.first_use <= t && t <= b.last_use) live += aligned_size(b, 256);
      peak = std::max(peak, live);
    }
    CHECK(plan.lower_bound_bytes == peak);
    CHECK(plan.arena_bytes >= peak);
    CHECK(plan.arena_bytes <= peak + peak / 2);  // random lifetimes fragment; steps plan tighter
  }
  // Nested lifetimes, as a training step's activations are: exact.
  std::vector<BufferRequest> nested;
  for (int i = 0; i < 2500; ++i) nested.push_back({"a" + std::to_string(i), 4096, i, 5000 - i, Category::activations});
  const Plan plan = plan_offsets(nested, 256);
  CHECK(plan_is_valid(nested, plan));
  CHECK(plan.arena_bytes == plan.lower_bound_bytes);
}
