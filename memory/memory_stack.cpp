#include <cnnengine/memory/memory_stack.hpp>

#include <algorithm>
#include <string>

#include <cnnengine/base/error.hpp>
#include "memory/block_heap.hpp"
#include "memory/budget_adaptor.hpp"
#include <cnnengine/memory/memory_resource.hpp>
#include <cnnengine/memory/out_of_memory.hpp>
#include "memory/statistics_adaptor.hpp"
#include "memory/strategy.hpp"
#include "memory/trace_adaptor.hpp"

namespace cnn::memory {

struct MemoryStack::Layers {
  explicit Layers(MemoryResource& upstream) : stats_(upstream) {}
  StatisticsAdaptor stats_;
  std::optional<TraceAdaptor> trace_;
  std::optional<BudgetAdaptor> budget_;
  std::optional<StatisticsAdaptor> staging_stats_;
  std::optional<BudgetAdaptor> staging_budget_;  // shares budget_'s
  std::unique_ptr<MemoryResource> strategy_;
  std::vector<std::unique_ptr<Adaptor>> wrappers_;
};

namespace {

MemoryResource& counted(StatisticsAdaptor& stats, std::optional<TraceAdaptor>& trace) {
  return trace ? static_cast<MemoryResource&>(*trace) : stats;
}

}  // namespace

MemoryStack::MemoryStack(MemoryResource& upstream, MemoryOptions options)
    : options_(std::move(options)), account_(options_.budget),
      layers_(std::make_unique<Layers>(upstream)) {
  if (!(options_.arena_factor >= 1.0 && options_.arena_factor <= 1024.0))  // NaN too
    throw ConfigError("MemoryOptions::arena_factor must be from 1 to 1024 (times the planned arena), got " +
                      std::to_string(options_.arena_factor));
  if (!options_.trace.empty()) layers_->trace_.emplace(layers_->stats_, options_.trace);
  if (options_.budget) layers_->budget_.emplace(counted(layers_->stats_, layers_->trace_), options_.budget);
}

MemoryStack::MemoryStack(MemoryResource& upstream, MemoryResource& staging_upstream, MemoryOptions options)
    : MemoryStack(upstream, std::move(options)) {
  layers_->staging_stats_.emplace(staging_upstream);
  if (layers_->budget_) layers_->staging_budget_.emplace(*layers_->staging_stats_, *layers_->budget_);
}

MemoryStack::~MemoryStack() { release_step_buffers(); }

bool MemoryStack::has_staging() const { return layers_->staging_stats_.has_value(); }
Statistics MemoryStack::statistics() const { return layers_->stats_.statistics(); }
void MemoryStack::reset_peak() { layers_->stats_.reset_peak(); }

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
  if (layers_->budget_) layers_->budget_->set_budget(account_.cap());
  return account_;
}

std::size_t MemoryStack::cap() const { return layers_->budget_ ? layers_->budget_->budget() : 0; }

MemoryResource& MemoryStack::blocks() {
  return layers_->budget_ ? static_cast<MemoryResource&>(*layers_->budget_) : counted(layers_->stats_, layers_->trace_);
}

MemoryResource& MemoryStack::staging() {
  if (!layers_->staging_stats_)
    throw ConfigError("this memory stack was built without a staging upstream: build it with the backend's "
                      "staging_memory() to stage a loader's batches under its budget");
  return layers_->staging_budget_ ? static_cast<MemoryResource&>(*layers_->staging_budget_) : *layers_->staging_stats_;
}

std::size_t MemoryStack::staging_bytes() const { return layers_->staging_stats_ ? layers_->staging_stats_->statistics().current_bytes : 0; }

Statistics MemoryStack::staging_statistics() const { return layers_->staging_stats_ ? layers_->staging_stats_->statistics() : Statistics{}; }

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
    layers_->strategy_ = make_strategy(options_.strategy, blocks(), capacity);
    top_ = layers_->strategy_.get();
  }
  arena_capacity_ = capacity;
  built_ = true;
}

Adaptor& MemoryStack::wrap_step_buffers(std::unique_ptr<Adaptor> adaptor) {
  if (!adaptor || !top_ || &adaptor->upstream() != top_)
    throw ConfigError("wrap_step_buffers: the adaptor must sit on the step buffers' resource (built, and not planned)");
  top_ = adaptor.get();
  layers_->wrappers_.push_back(std::move(adaptor));
  return *layers_->wrappers_.back();
}

void MemoryStack::release_step_buffers() {
  while (!layers_->wrappers_.empty()) layers_->wrappers_.pop_back();
  layers_->strategy_.reset();
  top_ = nullptr;
  built_ = false;
  arena_capacity_ = 0;
}

void MemoryStack::finish_trace() {
  if (!layers_->trace_) return;
  layers_->trace_->flush();
  if (!layers_->trace_->good())
    throw Error("writing the memory trace " + options_.trace.string() + " failed (disk full?): it is incomplete");
}

}  // namespace cnn::memory
