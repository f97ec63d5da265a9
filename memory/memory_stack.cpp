#include "cnnengine/memory/memory_stack.hpp"

#include <string>

#include "cnnengine/base/error.hpp"
#include "cnnengine/memory/block_heap.hpp"
#include "cnnengine/memory/bytes.hpp"
#include "cnnengine/memory/out_of_memory.hpp"

namespace cnn::memory {
namespace {

MemoryResource& counted(StatisticsAdaptor& stats, std::optional<TraceAdaptor>& trace) {
  return trace ? static_cast<MemoryResource&>(*trace) : stats;
}

}  // namespace

MemoryStack::MemoryStack(MemoryResource& upstream, MemoryOptions options, std::size_t outside)
    : options_(std::move(options)), stats_(upstream) {
  if (!options_.trace.empty()) trace_.emplace(stats_, options_.trace);
  if (options_.budget) {
    cap_ = options_.budget > outside ? options_.budget - outside : 0;
    budget_.emplace(counted(stats_, trace_), cap_);
  }
}

MemoryStack::~MemoryStack() { release_step_buffers(); }

MemoryResource& MemoryStack::blocks() {
  return budget_ ? static_cast<MemoryResource&>(*budget_) : counted(stats_, trace_);
}

void MemoryStack::build_step_buffers(std::size_t persistent, std::size_t planned_arena) {
  if (built_) return;
  std::size_t capacity = 0;
  if (options_.strategy == Strategy::arena) {
    // Rounded down: the arena rounds its capacity up to its granule, and must still fit.
    capacity = options_.budget ? (cap_ > persistent ? (cap_ - persistent) / BlockHeap::kGranularity * BlockHeap::kGranularity : 0)
                               : align_up(static_cast<std::size_t>(options_.arena_factor * static_cast<double>(planned_arena)),
                                          BlockHeap::kGranularity);
    if (capacity == 0) {
      OutOfMemoryDetails details;
      details.limit = cap_;
      details.requested = persistent;
      details.resource = "arena";
      throw OutOfMemory("the memory budget of " + format_bytes(options_.budget) + " leaves nothing for an arena after " +
                            format_bytes(persistent) + " of persistent blocks",
                        details);
    }
  }
  if (options_.strategy != Strategy::planned) {
    strategy_ = make_strategy(options_.strategy, blocks(), capacity);
    top_ = strategy_.get();
  }
  arena_capacity_ = capacity;
  built_ = true;
}

Adaptor& MemoryStack::wrap_step_buffers(std::unique_ptr<Adaptor> adaptor) {
  if (!adaptor || !top_ || &adaptor->upstream() != top_)
    throw ConfigError("wrap_step_buffers: the adaptor must sit on the step buffers' resource (built, and not planned)");
  top_ = adaptor.get();
  wrappers_.push_back(std::move(adaptor));
  return *wrappers_.back();
}

void MemoryStack::release_step_buffers() {
  while (!wrappers_.empty()) wrappers_.pop_back();
  strategy_.reset();
  top_ = nullptr;
  built_ = false;
  arena_capacity_ = 0;
}

void MemoryStack::finish_trace() {
  if (!trace_) return;
  trace_->flush();
  if (!trace_->good())
    throw Error("writing the memory trace " + options_.trace.string() + " failed (disk full?): it is incomplete");
}

}  // namespace cnn::memory
