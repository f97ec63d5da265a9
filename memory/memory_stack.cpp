#include "memory/memory_stack.hpp"

#include <algorithm>
#include <string>

#include "base/error.hpp"
#include "memory/block_heap.hpp"
#include "memory/bytes.hpp"
#include "memory/out_of_memory.hpp"

namespace cnn::memory {
namespace {

MemoryResource& counted(StatisticsAdaptor& stats, std::optional<TraceAdaptor>& trace) {
  return trace ? static_cast<MemoryResource&>(*trace) : stats;
}

}  // namespace

MemoryStack::MemoryStack(MemoryResource& upstream, MemoryOptions options)
    : options_(std::move(options)), account_(options_.budget), stats_(upstream) {
  if (!(options_.arena_factor >= 1.0 && options_.arena_factor <= 1024.0))  // NaN too
    throw ConfigError("MemoryOptions::arena_factor must be from 1 to 1024 (times the planned arena), got " +
                      std::to_string(options_.arena_factor));
  if (!options_.trace.empty()) trace_.emplace(stats_, options_.trace);
  if (options_.budget) budget_.emplace(counted(stats_, trace_), options_.budget);
}

MemoryStack::MemoryStack(MemoryResource& upstream, MemoryResource& staging_upstream, MemoryOptions options)
    : MemoryStack(upstream, std::move(options)) {
  staging_stats_.emplace(staging_upstream);
  if (budget_) staging_budget_.emplace(*staging_stats_, *budget_);
}

MemoryStack::~MemoryStack() { release_step_buffers(); }

BudgetAccount MemoryStack::account() const {
  if (settled_) return account_;
  BudgetAccount live = account_;
  live.add_loader_staging(staging_bytes());
  live.add_loader_staging(booked_);
  return live;
}

void MemoryStack::book_staging(std::size_t bytes) {
  BudgetAccount check;
  check.add_loader_staging(booked_);
  check.add_loader_staging(bytes);  // throws for more than any memory holds
  booked_ += bytes;
}

void MemoryStack::claim_booking(std::size_t bytes) { booked_ -= std::min(booked_, bytes); }

const BudgetAccount& MemoryStack::settle_account(std::size_t libraries, std::size_t communication) {
  BudgetAccount settled = BudgetAccount(options_.budget);
  settled.set_aside(libraries, communication);
  settled.add_loader_staging(staging_bytes());
  settled.add_loader_staging(booked_);
  account_ = settled;
  settled_ = true;
  if (budget_) budget_->set_budget(account_.cap());
  return account_;
}

std::size_t MemoryStack::cap() const { return budget_ ? budget_->budget() : 0; }

MemoryResource& MemoryStack::blocks() {
  return budget_ ? static_cast<MemoryResource&>(*budget_) : counted(stats_, trace_);
}

MemoryResource& MemoryStack::staging() {
  if (!staging_stats_)
    throw ConfigError("this memory stack was built without a staging upstream: build it with the backend's "
                      "staging_memory() to stage a loader's batches under its budget");
  return staging_budget_ ? static_cast<MemoryResource&>(*staging_budget_) : *staging_stats_;
}

std::size_t MemoryStack::staging_bytes() const { return staging_stats_ ? staging_stats_->statistics().current_bytes : 0; }

Statistics MemoryStack::staging_statistics() const { return staging_stats_ ? staging_stats_->statistics() : Statistics{}; }

void MemoryStack::build_step_buffers(std::size_t outside_arena, std::size_t planned_arena) {
  if (built_) return;
  std::size_t capacity = 0;
  if (options_.strategy == Strategy::arena) {
    const std::size_t limit = cap();  // the budget less what is set aside
    capacity = options_.budget ? account_.arena_capacity(outside_arena)
                               : align_up(static_cast<std::size_t>(options_.arena_factor * static_cast<double>(planned_arena)),
                                          BlockHeap::kGranularity);
    if (capacity == 0) {
      OutOfMemoryDetails details;
      details.limit = limit;
      details.requested = outside_arena + account_.loader_staging();
      details.resource = "arena";
      throw OutOfMemory("the memory budget of " + format_bytes(options_.budget) + " leaves nothing for an arena after " +
                            format_bytes(details.requested) + " of persistent blocks and staging",
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
