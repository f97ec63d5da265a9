#include "memory/detail/strategy_replay.hpp"

#include <algorithm>
#include <cstdint>
#include <numeric>

#include <cnnengine/memory/memory_resource.hpp>
#include <cnnengine/memory/out_of_memory.hpp>
#include "memory/strategy.hpp"

namespace cnn::memory {
namespace {

// Hands out addresses that nothing backs, from a range no real allocation uses here (it is never
// dereferenced), and counts what is held against a limit as the budget adaptor does.
class AddressSpace final : public MemoryResource {
 public:
  explicit AddressSpace(std::size_t limit) : limit_(limit) {}
  std::size_t peak() const { return peak_; }
  std::string name() const override { return "budget"; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, Category category) override {
    if (limit_ && (bytes > limit_ || held_ > limit_ - bytes)) {
      OutOfMemoryDetails details;
      details.requested = bytes;
      details.category = category;
      details.limit = limit_;
      details.resource = "budget";
      throw OutOfMemory(details);
    }
    next_ = align_up(next_, std::max(alignment, kDefaultAlignment));
    const std::uintptr_t at = next_;
    next_ += std::max<std::size_t>(bytes, 1);
    held_ += bytes;
    peak_ = std::max(peak_, held_);
    return reinterpret_cast<void*>(at);  // NOLINT: an address, never dereferenced
  }
  void do_deallocate(void*, std::size_t bytes, std::size_t, Category) override { held_ -= bytes; }

  std::size_t limit_;
  std::size_t held_ = 0;
  std::size_t peak_ = 0;
  std::uintptr_t next_ = std::uintptr_t{1} << 44;
};

// One step's requests against `resource`, in the order a step makes them; every block given back
// at the end, also when one is refused.
void replay_round(const std::vector<BufferRequest>& requests, MemoryResource& resource) {
  std::vector<std::size_t> by_start(requests.size()), by_end(requests.size());
  std::iota(by_start.begin(), by_start.end(), 0);
  std::iota(by_end.begin(), by_end.end(), 0);
  std::stable_sort(by_start.begin(), by_start.end(),
                   [&](std::size_t a, std::size_t b) { return requests[a].first_use < requests[b].first_use; });
  std::stable_sort(by_end.begin(), by_end.end(),
                   [&](std::size_t a, std::size_t b) { return requests[a].last_use < requests[b].last_use; });
  std::vector<void*> held(requests.size(), nullptr);
  auto give_back_all = [&] {
    for (std::size_t i = 0; i < requests.size(); ++i)
      if (held[i]) resource.deallocate(held[i], requests[i].bytes, kDefaultAlignment, requests[i].category);
  };
  try {
    std::size_t s = 0, e = 0;
    while (s < by_start.size() || e < by_end.size()) {
      int t = e < by_end.size() ? requests[by_end[e]].last_use : requests[by_start[s]].first_use;
      if (s < by_start.size()) t = std::min(t, requests[by_start[s]].first_use);
      for (; s < by_start.size() && requests[by_start[s]].first_use == t; ++s) {
        const BufferRequest& r = requests[by_start[s]];
        held[by_start[s]] = resource.allocate(r.bytes, kDefaultAlignment, r.category);
      }
      for (; e < by_end.size() && requests[by_end[e]].last_use <= t; ++e) {
        const BufferRequest& r = requests[by_end[e]];
        resource.deallocate(held[by_end[e]], r.bytes, kDefaultAlignment, r.category);
        held[by_end[e]] = nullptr;
      }
    }
  } catch (...) {
    give_back_all();
    throw;
  }
}

}  // namespace

StrategyReplay replay_step_buffers(Strategy strategy, std::size_t limit, std::size_t arena_capacity,
                                   const std::vector<const std::vector<BufferRequest>*>& rounds) {
  AddressSpace space(limit);
  StrategyReplay result;
  try {
    const std::unique_ptr<MemoryResource> resource = make_strategy(strategy, space, arena_capacity);
    for (const std::vector<BufferRequest>* round : rounds) replay_round(*round, *resource);
    result.served = true;
  } catch (const OutOfMemory& refusal) {
    result.refusal = refusal.what();
  }
  result.peak_bytes = space.peak();
  return result;
}

}  // namespace cnn::memory
