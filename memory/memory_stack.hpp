#pragma once
// The one place a memory budget becomes a cap. From one description (MemoryOptions), the
// device's upstream and its staging upstream it builds every resource the engine allocates from:
//
//   persistent blocks, the planned arena -------------------------------+
//   step buffers -> [the caller's adaptors] -> strategy (arena, pool, direct) +-> budget -> [trace] -> statistics -> upstream
//   a loader's staging ----------------------------------------------------> budget -> staging statistics -> staging upstream
//
// The two budget adaptors share one budget: what the device holds and what the loaders stage
// are capped together. The cap is the budget less what is counted in it but allocated by others
// (set_aside: the libraries' own workspaces such as cuBLAS's, the communicator's buffers). The
// Trainer builds one for itself; train_images and the allocation comparison use the same class.
#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "memory/adaptor.hpp"
#include "memory/budget_adaptor.hpp"
#include "memory/statistics_adaptor.hpp"
#include "memory/strategy.hpp"
#include "memory/trace_adaptor.hpp"

namespace cnn::memory {

struct MemoryOptions {
  std::size_t budget = 0;                 // bytes; 0: no budget
  Strategy strategy = Strategy::planned;  // where step buffers come from
  std::filesystem::path trace;            // record every allocation and release here; empty: none
  double arena_factor = 2.0;              // the arena strategy without a budget: this x the planned arena
};

class MemoryStack {
 public:
  // Throws ConfigError when the trace file cannot be created. Without a staging upstream there
  // is no staging() (a stack for step buffers alone, as the allocation comparison's).
  MemoryStack(MemoryResource& upstream, MemoryOptions options);
  MemoryStack(MemoryResource& upstream, MemoryResource& staging_upstream, MemoryOptions options);
  MemoryStack(const MemoryStack&) = delete;
  MemoryStack& operator=(const MemoryStack&) = delete;
  ~MemoryStack();

  const MemoryOptions& options() const { return options_; }
  // Bytes the budget keeps for memory that others allocate (the libraries' workspaces, the
  // communicator's buffers); the Trainer sets them before it plans. Replaces the earlier amount.
  void set_aside(std::size_t bytes);
  std::size_t set_aside() const { return set_aside_; }
  // What the budget lets through the stack (the budget less what is set aside); 0 without a budget.
  std::size_t cap() const;

  // Persistent blocks and the planned arena come from here.
  MemoryResource& blocks();
  // A loader's staging comes from here (data::Loader takes it): the staging upstream, under the
  // same budget as blocks(), counted in staging_statistics() and left out of the trace (which is
  // the steps'). A stack built without a staging upstream throws ConfigError.
  MemoryResource& staging();
  bool has_staging() const { return staging_stats_.has_value(); }
  // Bytes in use through staging() now.
  std::size_t staging_bytes() const;

  // Builds the strategy that serves step buffers, once; nothing under the planned strategy. The
  // arena strategy reserves its capacity now: under a budget all that the cap leaves after
  // `outside_arena` bytes (the persistent blocks, the loaders' staging; as on a card of that
  // size), otherwise arena_factor x `planned_arena`. The arena's reservation may throw OutOfMemory.
  void build_step_buffers(std::size_t outside_arena, std::size_t planned_arena);
  // What the arena strategy reserves under a budget whose cap is `cap`: all of it past
  // `outside_arena`, rounded down to the arena's granule (it rounds its capacity up, and must still
  // fit); 0 where nothing is left. The planner asks it too, to run the arena on a plan's buffers.
  static std::size_t arena_capacity_within(std::size_t cap, std::size_t outside_arena);
  bool step_buffers_built() const { return built_; }
  // What the arena strategy reserved (0 under the others).
  std::size_t arena_capacity() const { return arena_capacity_; }
  // The top of the step buffers' stack: null under the planned strategy or before the build.
  MemoryResource* step_buffers() const { return top_; }
  // Puts the caller's adaptor over the step buffers (a benchmark times them, a test injects
  // failures); its upstream must be step_buffers(). The stack keeps it; returns it.
  Adaptor& wrap_step_buffers(std::unique_ptr<Adaptor> adaptor);
  // Gives back the strategy and the adaptors over it (their caches too).
  void release_step_buffers();

  // Everything the stack has taken from its upstream, now and at the peak.
  Statistics statistics() const { return stats_.statistics(); }
  // Everything staging() has taken from the staging upstream (zeros without one).
  Statistics staging_statistics() const;
  void reset_peak() { stats_.reset_peak(); }
  // Flushes the trace; throws cnn::Error naming the file when a line could not be written (a
  // full disk). Call it when everything has been given back, so that the trace is whole.
  void finish_trace();

 private:
  MemoryOptions options_;
  std::size_t set_aside_ = 0;
  StatisticsAdaptor stats_;
  std::optional<TraceAdaptor> trace_;
  std::optional<BudgetAdaptor> budget_;
  std::optional<StatisticsAdaptor> staging_stats_;
  std::optional<BudgetAdaptor> staging_budget_;  // shares budget_'s
  std::unique_ptr<MemoryResource> strategy_;
  std::vector<std::unique_ptr<Adaptor>> wrappers_;
  MemoryResource* top_ = nullptr;
  bool built_ = false;
  std::size_t arena_capacity_ = 0;
};

}  // namespace cnn::memory
