#pragma once
// Where a memory budget's bytes go, added up in one place. The budget is shared by the trainer's
// own memory (persistent blocks, input staging, the step arena) and by bytes that others hold:
//
//   budget = set aside (the libraries' workspaces, a communicator's buffers)
//          + the loaders' staging (staged, or booked for a loader still to come)
//          + the trainer's bytes outside its arena + what the arena may take
//
// The memory stack owns the live account (MemoryStack::account); the batch planner plans in a
// copy of it, so that a plan, the stack's cap and the arena's reservation agree to the byte.
#include <cstddef>

namespace cnn::memory {

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

}  // namespace cnn::memory
