#pragma once
// Note [Work that waits for no one]: the CPU kernels split their work into a fixed number of
// ranges (one per thread asked for) and the calling thread and the pool's workers claim the
// ranges one by one. The caller returns as soon as every range is done: a worker that has not
// woken up by then (its core busy with another process) is not waited for, the caller has run
// its range too. OpenMP's parallel region ends in a barrier that every thread of the team must
// reach, so on a shared machine each of a step's thirty-odd regions waited for a descheduled
// worker to be given its core back: with two threads under a load of 5 to 7 a training run
// took 6 to 10 times as long as with one (benchmarks/results/compare_cpu_epochs_*.json).
//
// A range's results depend on its index alone, never on the thread that runs it (a kernel's
// per-range workspace and partial sums are indexed by the range), so the output is the same
// bits whichever threads take part: deterministic for a given thread count, as before.
//
// One pool per process, grown to the most workers any CpuBackend asked for. One job at a time:
// a caller that finds the pool busy (another thread's job, or a kernel called from inside a
// range) runs its ranges itself, in order. A job allocates nothing.
#include <atomic>
#include <cstdint>
#include <mutex>

namespace cnn::cpu {

class WorkPool {
 public:
  using Call = void (*)(void* context, int range);

  static WorkPool& instance();
  // At least `workers` threads beside the callers (they are started here, never in a job).
  void reserve(int workers);
  int workers() const { return started_.load(std::memory_order_acquire); }
  // call(context, r) once for every r in [0, ranges), on this thread and any idle workers.
  void run(int ranges, Call call, void* context);

 private:
  WorkPool() = default;
  void work(std::uint32_t generation);
  void worker_loop();
  void wait_for_claimed(int ranges);

  // The job: generation (high 32 bits), the next range to claim (16 bits), the ranges (16 bits).
  std::atomic<std::uint64_t> ticket_{0};
  std::atomic<int> done_{0};
  Call call_ = nullptr;  // written before the ticket is published, read after a claim
  void* context_ = nullptr;
  std::atomic<int> caller_core_{-1};  // where the job's caller was (Note [A worker woken on its caller's core])
  std::atomic<bool> busy_{false};  // one job at a time
  std::mutex growing_;             // reserve()
  std::atomic<int> started_{0};
};

}  // namespace cnn::cpu
