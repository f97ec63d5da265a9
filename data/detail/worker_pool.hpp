#pragma once
// Threads kept for a loader's life that share one job at a time: fn(i, thread) for every i of
// [0, n), on the calling thread and the pool's own, `thread` naming the caller's scratch. Nothing
// is allocated per job. If calls throw, the exception of the lowest index is rethrown once every
// thread has stopped, so that the error reported does not depend on timing.
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace cnn::data {

class WorkerPool {
 public:
  // threads in all, the caller's among them: threads - 1 of its own.
  explicit WorkerPool(int threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int threads() const { return static_cast<int>(helpers_.size()) + 1; }

  template <typename Fn>
  void run(std::size_t n, Fn& fn) {
    run_erased(n, &fn, [](void* f, std::size_t i, int thread) { (*static_cast<Fn*>(f))(i, thread); });
  }

 private:
  using Call = void (*)(void*, std::size_t, int);
  void run_erased(std::size_t n, void* fn, Call call);
  void work(int thread);  // this thread's share of the current job
  void helper(int thread);
  void stop_and_join();

  std::mutex mutex_;
  std::condition_variable start_, done_;
  std::uint64_t job_ = 0;  // one per run()
  bool stop_ = false;
  int busy_ = 0;  // helpers still in the current job
  // The current job, under mutex_ except next_'s claims.
  std::size_t n_ = 0, next_ = 0;
  void* fn_ = nullptr;
  Call call_ = nullptr;
  std::size_t failed_index_ = 0;
  std::exception_ptr failure_;
  std::vector<std::thread> helpers_;
};

}  // namespace cnn::data
