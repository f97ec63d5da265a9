#include "backends/cpu/detail/work_pool.hpp"

#include <algorithm>
#include <cstdint>
#include <thread>

#include "backends/cpu/detail/subnormals.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace cnn::cpu {
namespace {

// Spin this many pauses (some tens of microseconds) before sleeping: a step's kernels follow
// one another closely, and a futex wake-up costs more than the wait between two of them.
constexpr int kSpins = 2000;

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
  done_.store(0, std::memory_order_relaxed);
  const std::uint32_t generation = generation_of(ticket_.load(std::memory_order_relaxed)) + 1;
  ticket_.store(ticket(generation, 0, ranges), std::memory_order_release);
  ticket_.notify_all();
  work(generation);
  // Wait only for ranges that workers claimed and are running.
  int done = done_.load(std::memory_order_acquire);
  for (int spin = 0; done != ranges; done = done_.load(std::memory_order_acquire)) {
    if (spin < kSpins) {
      ++spin;
      pause();
    } else {
      done_.wait(done, std::memory_order_acquire);
    }
  }
  busy_.store(false, std::memory_order_release);
}

}  // namespace cnn::cpu
