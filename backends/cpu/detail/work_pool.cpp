#include "backends/cpu/detail/work_pool.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>

#include "backends/cpu/detail/core_placement.hpp"
#include "backends/cpu/detail/subnormals.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace cnn::cpu {
namespace {

// A worker spins this many pauses (some tens of microseconds) before sleeping: a step's kernels
// follow one another closely, and a futex wake-up costs more than the wait between two of them.
constexpr int kSpins = 2000;
// How long the caller, waiting for ranges a worker runs, spins and yields before it sleeps, and
// how often a worker may move off its caller's core (Note [A worker woken on its caller's core]).
constexpr auto kCallerSpinFor = std::chrono::milliseconds(2);
constexpr auto kMoveEvery = std::chrono::milliseconds(5);

// Note [A worker woken on its caller's core]: a thread that sleeps on a futex is woken where
// Linux chooses, and on this project's 2-core virtual hosts it often chose the core of the
// thread that woke it: the caller, done with its ranges, slept until the worker finished and was
// woken on the worker's core, or a worker that had slept was woken on the caller's. Then one
// waits for the other's time slice (milliseconds) while the other core idles: the caller claims
// every range itself and the job takes one thread's time, and each job the worker misses lets it
// sleep and be woken there again. conv_peak showed it: a 16 -> 16 convolution at 28x28 took
// 2.3 ms a call, one thread's time, in most runs; 1.1 ms with the two threads pinned apart. So
// the caller, waiting for ranges a worker runs, spins and then yields its core (to any thread
// that wants it) for up to 2 ms before it sleeps, and a worker that finds a new job while on the
// core its caller last ran on moves to another core it is allowed on (its affinity is put back
// after the move), at most once every 5 ms: on a host with more threads than cores, moves only
// trade one busy core for another. Either change alone left the 2.3 ms calls in about half the
// runs; with both, they are gone from nearly all. A training step's kernels follow one another
// without sleeps, so its speed does not move.

void pause() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

constexpr std::uint32_t generation_of(std::uint64_t t) { return static_cast<std::uint32_t>(t >> 32); }
constexpr int next_of(std::uint64_t t) { return static_cast<int>((t >> 16) & 0xffff); }
constexpr int ranges_of(std::uint64_t t) { return static_cast<int>(t & 0xffff); }
constexpr std::uint64_t ticket(std::uint32_t generation, int next, int ranges) {
  return (std::uint64_t{generation} << 32) | (static_cast<std::uint64_t>(next) << 16) | static_cast<std::uint64_t>(ranges);
}

}  // namespace

WorkPool& WorkPool::instance() {
  // Never destroyed: its workers are detached and end with the process.
  static WorkPool* pool = new WorkPool;
  return *pool;
}

void WorkPool::reserve(int workers) {
  workers = std::min(workers, 0xfffe);
  if (started_.load(std::memory_order_acquire) >= workers) return;
  const std::lock_guard<std::mutex> lock(growing_);
  for (int w = started_.load(std::memory_order_relaxed); w < workers; ++w) {
    std::thread([this] { worker_loop(); }).detach();
    started_.store(w + 1, std::memory_order_release);
  }
}

// Claims ranges of `generation` until none is left (or a newer job has replaced it).
void WorkPool::work(std::uint32_t generation) {
  std::uint64_t t = ticket_.load(std::memory_order_acquire);
  for (;;) {
    if (generation_of(t) != generation || next_of(t) >= ranges_of(t)) return;
    if (!ticket_.compare_exchange_weak(t, t + (std::uint64_t{1} << 16), std::memory_order_acq_rel,
                                       std::memory_order_acquire))
      continue;  // t holds the ticket as it is now
    // Claimed: the job cannot finish (nor call_ change) before this range is counted done.
    const int ranges = ranges_of(t);
    call_(context_, next_of(t));
    if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == ranges) done_.notify_all();
    t = ticket_.load(std::memory_order_acquire);
  }
}

void WorkPool::worker_loop() {
  // Our own threads: the kernels' mode for good (Note [Flushed subnormals]).
  const FlushSubnormals flush;
  std::uint32_t seen = generation_of(ticket_.load(std::memory_order_acquire));
  std::chrono::steady_clock::time_point last_move{};
  for (;;) {
    std::uint64_t t = ticket_.load(std::memory_order_acquire);
    for (int spin = 0; generation_of(t) == seen; t = ticket_.load(std::memory_order_acquire)) {
      if (spin < kSpins) {
        ++spin;
        pause();
      } else {
        ticket_.wait(t, std::memory_order_acquire);
      }
    }
    seen = generation_of(t);
    const int caller = caller_core_.load(std::memory_order_relaxed);
    if (caller >= 0 && caller == current_core()) {
      const auto now = std::chrono::steady_clock::now();
      if (now - last_move >= kMoveEvery && move_off_core(caller)) last_move = now;
    }
    work(seen);
  }
}

void WorkPool::run(int ranges, Call call, void* context) {
  if (ranges <= 1 || workers() == 0 || busy_.exchange(true, std::memory_order_acquire)) {
    for (int r = 0; r < ranges; ++r) call(context, r);
    return;
  }
  call_ = call;
  context_ = context;
  caller_core_.store(current_core(), std::memory_order_relaxed);
  done_.store(0, std::memory_order_relaxed);
  const std::uint32_t generation = generation_of(ticket_.load(std::memory_order_relaxed)) + 1;
  ticket_.store(ticket(generation, 0, ranges), std::memory_order_release);
  ticket_.notify_all();
  work(generation);
  wait_for_claimed(ranges);
  busy_.store(false, std::memory_order_release);
}

// The caller's wait for the ranges workers claimed and are running: pauses, then yields, then
// sleeps (Note [A worker woken on its caller's core]). The clock is read only once it waits.
void WorkPool::wait_for_claimed(int ranges) {
  int done = done_.load(std::memory_order_acquire);
  if (done == ranges) return;
  const auto start = std::chrono::steady_clock::now();
  bool spinning = true;
  for (int spin = 1; done != ranges; done = done_.load(std::memory_order_acquire), ++spin) {
    if (spinning && spin % 64 == 0) spinning = std::chrono::steady_clock::now() - start < kCallerSpinFor;
    if (spin < kSpins) {
      pause();
    } else if (spinning) {
      std::this_thread::yield();
    } else {
      done_.wait(done, std::memory_order_acquire);
    }
  }
}

}  // namespace cnn::cpu
