#pragma once
// The one place a memory budget becomes a cap. From one description (MemoryOptions) and the
// device's upstream it builds every resource the engine allocates from:
//
//   persistent blocks, the planned arena -------------------------------+
//   step buffers -> [the caller's adaptors] -> strategy (arena, pool, direct) +-> budget -> [trace] -> statistics -> upstream
//
// The budget adaptor's cap is the budget less what is counted in the budget but does not come
// through the stack (the loader's staging, the libraries' own workspaces such as cuBLAS's). The
// Trainer builds one for itself; train_images and the allocation comparison use the same class.
#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "cnnengine/memory/adaptor.hpp"
#include "cnnengine/memory/budget_adaptor.hpp"
#include "cnnengine/memory/statistics_adaptor.hpp"
#include "cnnengine/memory/strategy.hpp"
#include "cnnengine/memory/trace_adaptor.hpp"

namespace cnn::memory {

struct MemoryOptions {
  std::size_t budget = 0;                 // bytes; 0: no budget
  Strategy strategy = Strategy::planned;  // where step buffers come from
  std::filesystem::path trace;            // record every allocation and release here; empty: none
  double arena_factor = 2.0;              // the arena strategy without a budget: this x the planned arena
};

class MemoryStack {
 public:
  // `outside`: bytes the budget must leave to memory that does not come through the stack.
  // Throws ConfigError when the trace file cannot be created.
  MemoryStack(MemoryResource& upstream, MemoryOptions options, std::size_t outside = 0);
  MemoryStack(const MemoryStack&) = delete;
  MemoryStack& operator=(const MemoryStack&) = delete;
  ~MemoryStack();

  const MemoryOptions& options() const { return options_; }
  // What the budget lets through the stack (the budget less `outside`); 0 without a budget.
  std::size_t cap() const { return cap_; }

  // Persistent blocks and the planned arena come from here.
  MemoryResource& blocks();

  // Builds the strategy that serves step buffers, once; nothing under the planned strategy. The
  // arena strategy reserves its capacity now: under a budget all that the cap leaves after
  // `persistent` bytes (as on a card of that size), otherwise arena_factor x `planned_arena`.
  // The arena's reservation may throw OutOfMemory.
  void build_step_buffers(std::size_t persistent, std::size_t planned_arena);
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
  void reset_peak() { stats_.reset_peak(); }
  // Flushes the trace; throws cnn::Error naming the file when a line could not be written (a
  // full disk). Call it when everything has been given back, so that the trace is whole.
  void finish_trace();

 private:
  MemoryOptions options_;
  std::size_t cap_ = 0;
  StatisticsAdaptor stats_;
  std::optional<TraceAdaptor> trace_;
  std::optional<BudgetAdaptor> budget_;
  std::unique_ptr<MemoryResource> strategy_;
  std::vector<std::unique_ptr<Adaptor>> wrappers_;
  MemoryResource* top_ = nullptr;
  bool built_ = false;
  std::size_t arena_capacity_ = 0;
};

}  // namespace cnn::memory
