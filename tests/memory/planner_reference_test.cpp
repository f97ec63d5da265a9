// The offset planner against a plain reference: the placement written as the
// definition reads (for each buffer, every placed buffer that overlaps it in time, sorted by
// offset, scanned for the best-fitting gap) and the lower bound counted time step by time step,
// on random buffer sets, give the same offsets, arena and lower bound byte for byte.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <numeric>
#include <random>
#include <vector>

#include "memory/detail/planner.hpp"
#include <cnnengine/memory/memory_resource.hpp>

using namespace cnn::memory;

namespace {

// Each buffer into the smallest gap (the lowest such) between the placed buffers that overlap it
// in time, else above the highest of them.
std::vector<std::size_t> reference_place(const std::vector<BufferRequest>& requests,
                                         const std::vector<std::size_t>& sizes, const std::vector<std::size_t>& order,
                                         std::size_t& arena) {
  std::vector<std::size_t> offsets(requests.size(), 0);
  std::vector<bool> placed(requests.size(), false);
  arena = 0;
  for (std::size_t i : order) {
    std::vector<std::pair<std::size_t, std::size_t>> conflicts;  // offset, end
    for (std::size_t j = 0; j < requests.size(); ++j)
      if (placed[j] && requests[i].first_use <= requests[j].last_use && requests[j].first_use <= requests[i].last_use)
        conflicts.emplace_back(offsets[j], offsets[j] + sizes[j]);
    std::sort(conflicts.begin(), conflicts.end());
    std::size_t best_offset = 0, best_gap = SIZE_MAX, cursor = 0;
    bool found = false;
    for (const auto& [offset, end] : conflicts) {
      if (offset > cursor && offset - cursor >= sizes[i] && offset - cursor < best_gap) {
        best_gap = offset - cursor;
        best_offset = cursor;
        found = true;
      }
      cursor = std::max(cursor, end);
    }
    offsets[i] = found ? best_offset : cursor;
    placed[i] = true;
    arena = std::max(arena, offsets[i] + sizes[i]);
  }
  return offsets;
}

// plan_offsets' greedy as documented: largest first with four tie-breaks, and by bytes x time
// live; each again with the buffers live at the last time step of the lower bound first; the
// smallest arena kept (the first of equal ones).
Plan reference_plan(const std::vector<BufferRequest>& requests, std::size_t alignment) {
  std::vector<std::size_t> sizes(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i)
    sizes[i] = align_up(std::max<std::size_t>(requests[i].bytes, 1), alignment);
  // The liveness lower bound: the most bytes live at one time step, its categories at the first.
  Plan best;
  int last = 0, peak = 0;
  for (const BufferRequest& r : requests) last = std::max(last, r.last_use);
  for (int t = 0; t <= last; ++t) {
    CategoryBytes live;
    for (std::size_t i = 0; i < requests.size(); ++i)
      if (requests[i].first_use <= t && t <= requests[i].last_use) live[requests[i].category] += sizes[i];
    if (live.total() > best.lower_bound_bytes) {
      best.lower_bound_bytes = live.total();
      best.peak_by_category = live;
    }
    if (live.total() >= best.lower_bound_bytes) peak = t;
  }
  using Before = std::function<bool(std::size_t, std::size_t)>;
  auto lifetime = [&](std::size_t i) { return requests[i].last_use - requests[i].first_use; };
  auto area = [&](std::size_t i) { return static_cast<double>(sizes[i]) * (lifetime(i) + 1); };
  auto largest_first = [&](Before tie_break) -> Before {
    return [&, tie_break](std::size_t a, std::size_t b) {
      return sizes[a] != sizes[b] ? sizes[a] > sizes[b] : tie_break(a, b);
    };
  };
  std::vector<Before> orders = {
      largest_first([&](std::size_t a, std::size_t b) { return lifetime(a) > lifetime(b); }),
      largest_first([&](std::size_t a, std::size_t b) { return requests[a].first_use < requests[b].first_use; }),
      largest_first([&](std::size_t a, std::size_t b) { return requests[a].last_use > requests[b].last_use; }),
      largest_first([&](std::size_t a, std::size_t b) { return lifetime(a) < lifetime(b); }),
      [&](std::size_t a, std::size_t b) { return area(a) > area(b); },
  };
  for (std::size_t k = 0; k < 5; ++k)
    orders.push_back([&, then = orders[k]](std::size_t a, std::size_t b) {
      const bool live_a = requests[a].first_use <= peak && peak <= requests[a].last_use;
      const bool live_b = requests[b].first_use <= peak && peak <= requests[b].last_use;
      return live_a != live_b ? live_a : then(a, b);
    });
  bool first = true;
  for (const Before& before : orders) {
    std::vector<std::size_t> order(requests.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), before);
    std::size_t arena = 0;
    std::vector<std::size_t> offsets = reference_place(requests, sizes, order, arena);
    if (first || arena < best.arena_bytes) {
      best.offsets = std::move(offsets);
      best.arena_bytes = arena;
    }
    first = false;
  }
  return best;
}

// Buffers as a step has them: many of a few sizes (ties are where placements differ), some
// long-lived, on a horizon of about two time steps per buffer.
std::vector<BufferRequest> random_step(std::mt19937_64& rng, int count) {
  const int horizon = std::max(2, 2 * count / 3);
  const std::vector<std::size_t> sizes = {1, 256, 1000, 4096, 4096, 65536, 65536, 300000};
  std::vector<BufferRequest> buffers;
  for (int i = 0; i < count; ++i) {
    BufferRequest b;
    b.bytes = sizes[std::uniform_int_distribution<std::size_t>(0, sizes.size() - 1)(rng)];
    b.first_use = std::uniform_int_distribution<int>(0, horizon)(rng);
    const bool long_lived = std::uniform_int_distribution<int>(0, 3)(rng) == 0;
    b.last_use = b.first_use + std::uniform_int_distribution<int>(0, long_lived ? horizon : 3)(rng);
    b.category = static_cast<Category>(std::uniform_int_distribution<int>(0, 6)(rng));
    buffers.push_back(b);
  }
  return buffers;
}

}  // namespace

TEST_CASE("the offset planner gives the reference's offsets, arena and lower bound", "[planner]") {
  std::mt19937_64 rng(20261125);
  for (int round = 0; round < 60; ++round) {
    const int count = round < 50 ? std::uniform_int_distribution<int>(1, 120)(rng) : 2000;
    const std::vector<BufferRequest> buffers = random_step(rng, count);
    const Plan plan = plan_offsets(buffers, kDefaultAlignment);
    const Plan reference = reference_plan(buffers, kDefaultAlignment);
    INFO("round " << round << ", " << count << " buffers");
    REQUIRE(plan.arena_bytes == reference.arena_bytes);
    REQUIRE(plan.offsets == reference.offsets);
    CHECK(plan.lower_bound_bytes == reference.lower_bound_bytes);
    CHECK(plan.peak_by_category.bytes == reference.peak_by_category.bytes);
    CHECK(plan_is_valid(buffers, plan));
  }
}
