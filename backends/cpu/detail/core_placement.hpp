#pragma once
// Which core a thread runs on, and moving it off one (Note [A worker woken on its caller's core]
// in work_pool.cpp says why the pool needs this). Linux only; elsewhere nothing is known and
// nothing moves.

namespace cnn::cpu {

// The core this thread runs on now, or -1 where the system does not say.
int current_core();

// Moves this thread to another core it is allowed on, leaving it allowed on every core it was
// allowed on before (its affinity is narrowed for the move, then put back). False, and nothing
// changed, where it may run on `core` alone or the system refuses.
bool move_off_core(int core);

}  // namespace cnn::cpu
