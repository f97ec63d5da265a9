#pragma once
// The one place a memory budget becomes a cap. From one description (MemoryOptions), the
// device's upstream and its staging upstream it builds every resource the engine allocates from:
//
//   persistent blocks, the planned arena -------------------------------+
//   step buffers -> [the caller's adaptors] -> strategy (arena, pool, direct) +-> budget -> [trace] -> statistics -> upstream
//   a loader's staging ----------------------------------------------------> budget -> staging statistics -> staging upstream
//
// The two budget adaptors share one budget: what the device holds and what the loaders stage
// are capped together. The stack owns the budget's account (BudgetAccount, below): the cap
// is the budget less what is counted in it but allocated by others (the libraries' own
// workspaces such as cuBLAS's, the communicator's buffers), and the loaders' staging is what
// they stage through staging() or have booked for later. The Trainer builds one for itself, or
// plans in one the caller built (with its loaders); train_images and the allocation comparison
// use the same class. Beside it, the names of the allocation strategies it builds (Strategy).
#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <cnnengine/memory/memory_resource.hpp>

namespace cnn::memory {

// Where a memory budget's bytes go, added up in one place. The budget is shared by the trainer's
// own memory (persistent blocks, input staging, the step arena) and by bytes that others hold:
//
//   budget = set aside (the libraries' workspaces, a communicator's buffers)
//          + the loaders' staging (staged, or booked for a loader still to come)
//          + the trainer's bytes outside its arena + what the arena may take
//
// The memory stack owns the live account (MemoryStack::account); the batch planner plans in a
// copy of it, so that a plan, the stack's cap and the arena's reservation agree to the byte.
class BudgetAccount {
 public:
  BudgetAccount() = default;  // no budget: nothing is capped
  explicit BudgetAccount(std::size_t budget) : budget_(budget) {}

  std::size_t budget() const { return budget_; }  // 0: none
  bool limited() const { return budget_ != 0; }

  // Bytes the budget counts but others allocate: the libraries' own workspaces (cuBLAS's) and a
  // data-parallel communicator's buffers. Replaces the earlier amounts. Throws ConfigError for
  // more than any memory holds (a sum with them would wrap around).
  void set_aside(std::size_t libraries, std::size_t communication);
  std::size_t libraries() const { return libraries_; }
  std::size_t communication() const { return communication_; }
  std::size_t set_aside() const { return libraries_ + communication_; }

  // Bytes the loaders stage beside the trainer's memory: adds `bytes` (throws ConfigError as
  // set_aside does).
  void add_loader_staging(std::size_t bytes);
  std::size_t loader_staging() const { return loader_staging_; }

  // What the budget lets through the memory stack: the budget less what is set aside (0 where
  // nothing is left); 0 without a budget.
  std::size_t cap() const;
  // Everything the budget holds beside the trainer's own bytes: set aside and the loaders' staging.
  std::size_t beside_trainer() const { return set_aside() + loader_staging_; }
  // What the budget leaves the step buffers after `outside_arena` bytes of the trainer's own
  // (persistent blocks, input staging) and everything beside the trainer; 0 where nothing is
  // left, and without a budget.
  std::size_t left_for_step_buffers(std::size_t outside_arena) const;
  // What the arena strategy reserves of it: rounded down to the arena's granule (the arena
  // rounds its capacity up, and must still fit).
  std::size_t arena_capacity(std::size_t outside_arena) const;

 private:
  std::size_t budget_ = 0;
  std::size_t libraries_ = 0;
  std::size_t communication_ = 0;
  std::size_t loader_staging_ = 0;
};

// The allocation strategy chosen at run time, so that one training can run on each.
enum class Strategy {
  planned,  // the default: one arena, every step buffer at an offset fixed before step 1
  arena,    // one reservation up front, best fit inside it, never grows
  pool,     // caching best fit that grows (PyTorch's and TensorFlow's way)
  direct,   // one upstream call per request
};

// "planned", "arena", "pool" or "direct"; anything else is a ConfigError naming them.
Strategy parse_strategy(std::string_view word);
std::string to_string(Strategy strategy);

struct MemoryOptions {
  std::size_t budget = 0;                 // bytes; 0: no budget
  Strategy strategy = Strategy::planned;  // where step buffers come from
  std::filesystem::path trace;            // record every allocation and release here; empty: none
  double arena_factor = 2.0;              // the arena strategy without a budget: this x the planned arena
};

class Adaptor;  // memory/adaptor.hpp, in the tree

class MemoryStack {
 public:
  // Throws ConfigError when the trace file cannot be created. Without a staging upstream there
  // is no staging() (a stack for step buffers alone).
  MemoryStack(MemoryResource& upstream, MemoryOptions options);
  MemoryStack(MemoryResource& upstream, MemoryResource& staging_upstream, MemoryOptions options);
  MemoryStack(const MemoryStack&) = delete;
  MemoryStack& operator=(const MemoryStack&) = delete;
  ~MemoryStack();

  const MemoryOptions& options() const { return options_; }
  // The budget's account: the budget, what is set aside, and the loaders' staging. Until
  // settle_account() the loaders' staging is what staging() holds now plus what is booked;
  // after, it is what it was then (the trainer's own input staging comes from staging() too,
  // and is the trainer's, not a loader's).
  BudgetAccount account() const;
  // Room in the budget for a loader to be built later (data::Loader::book): its staging counts
  // in the account as if staged. Throws ConfigError for more than any memory holds.
  void book_staging(std::size_t bytes);
  // A loader built on a booking now stages `bytes` through staging(): they are no longer booked
  // (data::Loader's constructor on a stack calls it).
  void claim_booking(std::size_t bytes);
  // Sets aside what others allocate under the budget (the libraries' workspaces, the
  // communicator's buffers; replacing the earlier amounts), fixes the loaders' staging at what
  // account() counts now, and returns the account. The Trainer calls it before it plans.
  const BudgetAccount& settle_account(std::size_t libraries, std::size_t communication);
  // What the budget lets through the stack (the budget less what is set aside); 0 without a budget.
  std::size_t cap() const;

  // Persistent blocks and the planned arena come from here.
  MemoryResource& blocks();
  // A loader's staging comes from here (data::Loader takes it): the staging upstream, under the
  // same budget as blocks(), counted in staging_statistics() and left out of the trace (which is
  // the steps'). A stack built without a staging upstream throws ConfigError.
  MemoryResource& staging();
  bool has_staging() const;
  // Bytes in use through staging() now.
  std::size_t staging_bytes() const;

  // Builds the strategy that serves step buffers, once; nothing under the planned strategy. The
  // arena strategy reserves its capacity now: under a budget all that the account leaves after
  // `outside_arena` bytes of the trainer's own (its persistent blocks and input staging; as on a
  // card of that size, BudgetAccount::arena_capacity), otherwise arena_factor x `planned_arena`.
  // The arena's reservation may throw OutOfMemory.
  void build_step_buffers(std::size_t outside_arena, std::size_t planned_arena);
  bool step_buffers_built() const { return built_; }
  // What the arena strategy reserved (0 under the others).
  std::size_t arena_capacity() const { return arena_capacity_; }
  // The top of the step buffers' stack: null under the planned strategy or before the build.
  MemoryResource* step_buffers() const { return top_; }
  // Puts the caller's adaptor over the step buffers (a benchmark times them, a test injects
  // failures); its upstream must be step_buffers(). The stack keeps it; returns it. For the
  // benchmarks and tests in the tree: the adaptors are not installed.
  Adaptor& wrap_step_buffers(std::unique_ptr<Adaptor> adaptor);
  // Gives back the strategy and the adaptors over it (their caches too).
  void release_step_buffers();

  // Everything the stack has taken from its upstream, now and at the peak.
  Statistics statistics() const;
  // Everything staging() has taken from the staging upstream (zeros without one).
  Statistics staging_statistics() const;
  void reset_peak();
  // Flushes the trace; throws cnn::Error naming the file when a line could not be written (a
  // full disk). Call it when everything has been given back, so that the trace is whole.
  void finish_trace();

 private:
  MemoryOptions options_;
  BudgetAccount account_;      // set aside; the loaders' staging once settled
  std::size_t booked_ = 0;     // staging booked for loaders not built yet
  bool settled_ = false;
  // The adaptors and the strategy, in the order they are stacked (memory_stack.cpp).
  struct Layers;
  std::unique_ptr<Layers> layers_;
  MemoryResource* top_ = nullptr;
  bool built_ = false;
  std::size_t arena_capacity_ = 0;
};

}  // namespace cnn::memory
