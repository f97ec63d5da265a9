#include "memory/detail/planner.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <numeric>
#include <set>
#include <stdexcept>

#include <cnnengine/base/error.hpp>
#include <cnnengine/memory/memory_resource.hpp>

namespace cnn::memory {
namespace {

bool overlap_in_time(const BufferRequest& a, const BufferRequest& b) {
  return a.first_use <= b.last_use && b.first_use <= a.last_use;
}

// By time; the order among events of one time does not matter (a time's events are all applied
// before its total is read). A step's times are dense, so a counting sort: O(n).
template <class Event>
void sort_by_time(std::vector<Event>& events) {
  if (events.empty()) return;
  const auto [low, high] = std::minmax_element(events.begin(), events.end(),
                                               [](const Event& a, const Event& b) { return a.time < b.time; });
  const auto span = static_cast<std::size_t>(static_cast<long long>(high->time) - low->time) + 1;
  if (span > 4 * events.size()) {
    std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.time < b.time; });
    return;
  }
  const int first = low->time;
  std::vector<std::size_t> start(span + 1, 0);
  for (const Event& e : events) ++start[static_cast<std::size_t>(e.time - first) + 1];
  for (std::size_t t = 1; t <= span; ++t) start[t] += start[t - 1];
  std::vector<Event> sorted(events.size());
  for (const Event& e : events) sorted[start[static_cast<std::size_t>(e.time - first)]++] = e;
  events = std::move(sorted);
}

// The largest sum of bytes live at one time step, and its categories (the first such step), by a
// sweep over the buffers' starts and ends: O(n) for a step's dense times. Returns the last time
// step whose live bytes reach it.
int compute_lower_bound(const std::vector<BufferRequest>& requests, const std::vector<std::size_t>& sizes,
                        Plan& plan) {
  struct Event {
    int time;
    bool starts;  // at `time` it becomes live; otherwise it is gone from `time` on
    std::size_t request;
  };
  std::vector<Event> events;
  events.reserve(2 * requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    events.push_back({requests[i].first_use, true, i});
    events.push_back({requests[i].last_use + 1, false, i});
  }
  sort_by_time(events);
  CategoryBytes live;
  std::size_t total = 0;
  int peak = 0;
  for (std::size_t e = 0; e < events.size();) {
    const int time = events[e].time;
    for (; e < events.size() && events[e].time == time; ++e) {
      const BufferRequest& r = requests[events[e].request];
      const std::size_t bytes = sizes[events[e].request];
      if (events[e].starts) {
        live[r.category] += bytes;
        total += bytes;
      } else {
        live[r.category] -= bytes;
        total -= bytes;
      }
    }
    if (total > plan.lower_bound_bytes) {
      plan.lower_bound_bytes = total;
      plan.peak_by_category = live;
    }
    if (total >= plan.lower_bound_bytes) peak = time;
  }
  return peak;
}

// Note [Two placement algorithms]: greedy by size (place_in_order) looks, for each buffer, at
// every buffer placed before it that overlaps it in time. In a training step the activations
// kept for backward are live together at the loss, so that is O(n^2) however it is indexed: 4,000
// layers took seconds to plan. Up to kGreedyLimit buffers (every network we know of: resnet18's
// step has about 400) it is kept, for its tighter arenas; beyond, the planner simulates the step
// in time order instead (place_in_time_order: best fit in a free list sorted by size, O(n log n)),
// which is as tight on a chain of layers and plans 10,000 layers in a fraction of a second
// (benchmarks/plan_scaling.cpp).
constexpr std::size_t kGreedyLimit = 2048;

// Buffers in order of their first use (the largest first among those that start together) take
// the smallest free gap that holds them, else the top of the arena; a buffer's bytes are free
// again after its last use, merged with the free gaps beside them.
void place_in_time_order(const std::vector<BufferRequest>& requests, const std::vector<std::size_t>& sizes,
                         Plan& plan) {
  std::vector<std::size_t> by_start(requests.size()), by_end(requests.size());
  std::iota(by_start.begin(), by_start.end(), 0);
  std::iota(by_end.begin(), by_end.end(), 0);
  std::stable_sort(by_start.begin(), by_start.end(), [&](std::size_t a, std::size_t b) {
    if (requests[a].first_use != requests[b].first_use) return requests[a].first_use < requests[b].first_use;
    return sizes[a] > sizes[b];
  });
  std::stable_sort(by_end.begin(), by_end.end(),
                   [&](std::size_t a, std::size_t b) { return requests[a].last_use < requests[b].last_use; });
  std::map<std::size_t, std::size_t> gaps;                 // offset -> bytes
  std::set<std::pair<std::size_t, std::size_t>> by_size;   // (bytes, offset)
  std::size_t top = 0;
  auto add_gap = [&](std::size_t offset, std::size_t bytes) {
    auto next = gaps.lower_bound(offset);
    if (next != gaps.end() && next->first == offset + bytes) {  // merge with the gap after
      bytes += next->second;
      by_size.erase({next->second, next->first});
      next = gaps.erase(next);
    }
    if (next != gaps.begin()) {  // and with the gap before
      auto before = std::prev(next);
      if (before->first + before->second == offset) {
        offset = before->first;
        bytes += before->second;
        by_size.erase({before->second, before->first});
        gaps.erase(before);
      }
    }
    if (offset + bytes == top) {  // a gap at the top lowers the top
      top = offset;
      return;
    }
    gaps[offset] = bytes;
    by_size.insert({bytes, offset});
  };
  plan.offsets.assign(requests.size(), 0);
  plan.arena_bytes = 0;
  std::size_t ended = 0;
  for (std::size_t i : by_start) {
    for (; ended < by_end.size() && requests[by_end[ended]].last_use < requests[i].first_use; ++ended)
      add_gap(plan.offsets[by_end[ended]], sizes[by_end[ended]]);
    const auto fit = by_size.lower_bound({sizes[i], 0});
    if (fit != by_size.end()) {
      const auto [bytes, offset] = *fit;
      by_size.erase(fit);
      gaps.erase(offset);
      plan.offsets[i] = offset;
      if (bytes > sizes[i]) add_gap(offset + sizes[i], bytes - sizes[i]);
    } else {
      plan.offsets[i] = top;
      top += sizes[i];
    }
    plan.arena_bytes = std::max(plan.arena_bytes, plan.offsets[i] + sizes[i]);
  }
}

}  // namespace

namespace {

// Greedy placement in the given order: each buffer goes into the best-fitting gap left by the
// buffers already placed that overlap it in time, else after the last of them. The placed buffers
// are kept sorted by offset, so that those overlapping in time are met in offset order without a
// sort per buffer (the order among equal offsets changes no gap).
void place_in_order(const std::vector<BufferRequest>& requests, const std::vector<std::size_t>& sizes,
                    const std::vector<std::size_t>& order, Plan& plan) {
  struct Held {
    std::size_t offset, end;
    int first_use, last_use;
  };
  plan.offsets.assign(requests.size(), 0);
  plan.arena_bytes = 0;
  std::vector<Held> by_offset;
  by_offset.reserve(requests.size());
  for (std::size_t i : order) {
    const BufferRequest& r = requests[i];
    std::size_t best_offset = 0, best_gap = SIZE_MAX, cursor = 0;
    bool found = false;
    for (const Held& c : by_offset) {
      if (c.first_use > r.last_use || r.first_use > c.last_use) continue;
      if (c.offset > cursor) {
        const std::size_t gap = c.offset - cursor;
        if (gap >= sizes[i] && gap < best_gap) {
          best_gap = gap;
          best_offset = cursor;
          found = true;
        }
      }
      cursor = std::max(cursor, c.end);
    }
    plan.offsets[i] = found ? best_offset : cursor;
    const Held placed{plan.offsets[i], plan.offsets[i] + sizes[i], r.first_use, r.last_use};
    by_offset.insert(std::upper_bound(by_offset.begin(), by_offset.end(), placed,
                                      [](const Held& a, const Held& b) { return a.offset < b.offset; }),
                     placed);
    plan.arena_bytes = std::max(plan.arena_bytes, placed.end);
  }
}

}  // namespace

Plan plan_offsets(const std::vector<BufferRequest>& requests, std::size_t alignment) {
  Plan plan;
  plan.alignment = alignment;
  plan.offsets.assign(requests.size(), 0);
  std::vector<std::size_t> sizes(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].last_use < requests[i].first_use)
      throw ConfigError("buffer '" + requests[i].name + "' is last used before it is first used");
    sizes[i] = align_up(std::max<std::size_t>(requests[i].bytes, 1), alignment);
  }
  const int peak = compute_lower_bound(requests, sizes, plan);
  if (requests.size() > kGreedyLimit) {
    place_in_time_order(requests, sizes, plan);
    return plan;
  }

  // Largest first, with a few tie-breaks (ties and near-ties are where greedy placements differ);
  // and by bytes x time live, which puts the long-lived first where short buffers are larger (a
  // 16-bit step's float32 copies: step_plan.cpp, Note [16-bit values]). Each again with the
  // buffers live at the peak first: placed first, they fill [0, lower bound) without a gap, and
  // the rest fit around them where they can (resnet18's step at 3x32x32 reaches the bound so where
  // no other order does). Each order is deterministic; the smallest arena is kept.
  auto lifetime = [&](std::size_t i) { return requests[i].last_use - requests[i].first_use; };
  auto area = [&](std::size_t i) { return static_cast<double>(sizes[i]) * (lifetime(i) + 1); };
  using Before = std::function<bool(std::size_t, std::size_t)>;
  auto largest_first = [&](Before tie_break) -> Before {
    return [&sizes, tie_break](std::size_t a, std::size_t b) {
      if (sizes[a] != sizes[b]) return sizes[a] > sizes[b];
      return tie_break(a, b);
    };
  };
  std::vector<Before> orders = {
      largest_first([&](std::size_t a, std::size_t b) { return lifetime(a) > lifetime(b); }),
      largest_first([&](std::size_t a, std::size_t b) { return requests[a].first_use < requests[b].first_use; }),
      largest_first([&](std::size_t a, std::size_t b) { return requests[a].last_use > requests[b].last_use; }),
      largest_first([&](std::size_t a, std::size_t b) { return lifetime(a) < lifetime(b); }),
      [&](std::size_t a, std::size_t b) { return area(a) > area(b); },
  };
  auto at_peak_first = [&requests, peak](Before then) -> Before {
    return [&requests, peak, then](std::size_t a, std::size_t b) {
      const bool live_a = requests[a].first_use <= peak && peak <= requests[a].last_use;
      const bool live_b = requests[b].first_use <= peak && peak <= requests[b].last_use;
      if (live_a != live_b) return live_a;
      return then(a, b);
    };
  };
  const std::size_t plain = orders.size();
  for (std::size_t k = 0; k < plain; ++k) orders.push_back(at_peak_first(orders[k]));
  bool first = true;
  for (const Before& before : orders) {
    std::vector<std::size_t> order(requests.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), before);
    Plan candidate = plan;
    place_in_order(requests, sizes, order, candidate);
    if (first || candidate.arena_bytes < plan.arena_bytes) plan = std::move(candidate);
    first = false;
  }
  return plan;
}

bool plan_is_valid(const std::vector<BufferRequest>& requests, const Plan& plan) {
  if (plan.offsets.size() != requests.size()) return false;
  auto size_of = [&](std::size_t i) {
    return align_up(std::max<std::size_t>(requests[i].bytes, 1), plan.alignment ? plan.alignment : 1);
  };
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (plan.alignment && plan.offsets[i] % plan.alignment) return false;
    if (plan.offsets[i] + size_of(i) > plan.arena_bytes) return false;
    for (std::size_t j = i + 1; j < requests.size(); ++j) {
      if (!overlap_in_time(requests[i], requests[j])) continue;
      const bool disjoint = plan.offsets[i] + size_of(i) <= plan.offsets[j] ||
                            plan.offsets[j] + size_of(j) <= plan.offsets[i];
      if (!disjoint) return false;
    }
  }
  return true;
}

}  // namespace cnn::memory
