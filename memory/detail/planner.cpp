#include "cnnengine/memory/detail/planner.hpp"

#include <algorithm>
#include <functional>
#include <numeric>
#include <stdexcept>

#include "cnnengine/base/error.hpp"
#include "cnnengine/memory/bytes.hpp"

namespace cnn::memory {
namespace {

bool overlap_in_time(const BufferRequest& a, const BufferRequest& b) {
  return a.first_use <= b.last_use && b.first_use <= a.last_use;
}

struct Placed {
  std::size_t offset;
  std::size_t end;
};

void compute_lower_bound(const std::vector<BufferRequest>& requests,
                         const std::vector<std::size_t>& sizes, Plan& plan) {
  if (requests.empty()) return;
  int t_min = requests[0].first_use, t_max = requests[0].last_use;
  for (const auto& r : requests) {
    t_min = std::min(t_min, r.first_use);
    t_max = std::max(t_max, r.last_use);
  }
  for (int t = t_min; t <= t_max; ++t) {
    CategoryBytes live;
    for (std::size_t i = 0; i < requests.size(); ++i)
      if (requests[i].first_use <= t && t <= requests[i].last_use)
        live[requests[i].category] += sizes[i];
    if (live.total() > plan.lower_bound_bytes) {
      plan.lower_bound_bytes = live.total();
      plan.peak_by_category = live;
    }
  }
}

}  // namespace

namespace {

// Greedy placement in the given order: each buffer goes into the best-fitting gap left by the
// buffers already placed that overlap it in time, else after the last of them.
void place_in_order(const std::vector<BufferRequest>& requests, const std::vector<std::size_t>& sizes,
                    const std::vector<std::size_t>& order, Plan& plan) {
  plan.offsets.assign(requests.size(), 0);
  plan.arena_bytes = 0;
  std::vector<bool> placed(requests.size(), false);
  std::vector<Placed> conflicts;
  for (std::size_t i : order) {
    conflicts.clear();
    for (std::size_t j = 0; j < requests.size(); ++j)
      if (placed[j] && overlap_in_time(requests[i], requests[j]))
        conflicts.push_back({plan.offsets[j], plan.offsets[j] + sizes[j]});
    std::sort(conflicts.begin(), conflicts.end(),
              [](const Placed& a, const Placed& b) { return a.offset < b.offset; });
    std::size_t best_offset = 0, best_gap = SIZE_MAX, cursor = 0;
    bool found = false;
    for (const auto& c : conflicts) {
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
    placed[i] = true;
    plan.arena_bytes = std::max(plan.arena_bytes, plan.offsets[i] + sizes[i]);
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
  compute_lower_bound(requests, sizes, plan);

  // Largest first always; ties (and near-ties) are where greedy placements differ, so try a few
  // tie-breaks and keep the smallest arena. Each order is deterministic.
  auto lifetime = [&](std::size_t i) { return requests[i].last_use - requests[i].first_use; };
  using Before = std::function<bool(std::size_t, std::size_t)>;
  const std::vector<Before> tie_breaks = {
      [&](std::size_t a, std::size_t b) { return lifetime(a) > lifetime(b); },
      [&](std::size_t a, std::size_t b) { return requests[a].first_use < requests[b].first_use; },
      [&](std::size_t a, std::size_t b) { return requests[a].last_use > requests[b].last_use; },
      [&](std::size_t a, std::size_t b) { return lifetime(a) < lifetime(b); },
  };
  bool first = true;
  for (const auto& tie_break : tie_breaks) {
    std::vector<std::size_t> order(requests.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      if (sizes[a] != sizes[b]) return sizes[a] > sizes[b];
      return tie_break(a, b);
    });
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
