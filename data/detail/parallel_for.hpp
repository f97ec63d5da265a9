#pragma once
// Runs fn(i) for i in [0, n) on a few threads. If calls throw, the exception of the lowest
// index is rethrown once all threads have stopped, so the error reported does not depend on
// thread timing.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace cnn::data {

template <typename Fn>
void parallel_for(std::size_t n, Fn&& fn) {
  const std::size_t workers =
      std::min<std::size_t>(n, std::max(1u, std::thread::hardware_concurrency()));
  std::atomic<std::size_t> next{0};
  std::mutex mutex;
  std::size_t failed_index = n;
  std::exception_ptr failure;

  auto work = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < n;) {
      {
        std::lock_guard lock(mutex);
        if (i > failed_index) return;  // a lower index already failed: its error wins
      }
      try {
        fn(i);
      } catch (...) {
        std::lock_guard lock(mutex);
        if (i < failed_index) {
          failed_index = i;
          failure = std::current_exception();
        }
      }
    }
  };

  std::vector<std::thread> threads;
  try {
    for (std::size_t t = 1; t < workers; ++t) threads.emplace_back(work);
  } catch (...) {
    // Could not start more threads: the ones running and this one finish the work.
  }
  work();
  for (auto& thread : threads) thread.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace cnn::data
