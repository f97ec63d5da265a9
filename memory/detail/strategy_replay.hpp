#pragma once
// What a dynamic strategy (arena, pool, direct) needs to serve a step's buffers, found by running
// the strategy itself, before anything is allocated, over an address space that hands out
// addresses and holds nothing (the strategies' bookkeeping never touches the memory it manages).
// The offset planner packs the same buffers knowing every lifetime ahead; a strategy serves them
// one at a time, and its size classes, chunks and fragmentation may need more: a plan that fits
// a budget only by the planner's offsets would fail at step 1 under such a strategy.
#include <cstddef>
#include <string>
#include <vector>

#include "memory/detail/planner.hpp"
#include <cnnengine/memory/memory_stack.hpp>

namespace cnn::memory {

struct StrategyReplay {
  bool served = false;         // every request of every round was served
  std::size_t peak_bytes = 0;  // the most the strategy held from its upstream at once
  std::string refusal;         // the OutOfMemory's message where one was refused
};

// Runs `rounds` in order on one fresh `strategy` (not planned) whose upstream holds at most
// `limit` bytes (0: no limit); an arena strategy reserves `arena_capacity` of them. Each round is
// one step's requests, served as a step allocates them (engine/train/detail/step_memory.hpp): at each
// time step, the buffers first used then are allocated in request order, then those last used
// then are given back in request order. Time near-linear in the requests.
StrategyReplay replay_step_buffers(Strategy strategy, std::size_t limit, std::size_t arena_capacity,
                                   const std::vector<const std::vector<BufferRequest>*>& rounds);

}  // namespace cnn::memory
