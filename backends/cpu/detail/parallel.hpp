#pragma once
// Static work splitting over OpenMP threads. Each thread gets one contiguous range and its own
// index, so per-thread partial results can be reduced in a fixed order (deterministic output).
// Every thread runs its share with subnormals flushed (Note [Flushed subnormals]).
#include <omp.h>

#include <algorithm>
#include <cstddef>

#include "cnnengine/backends/cpu/detail/subnormals.hpp"

namespace cnn::cpu {

// How many threads parallel_ranges asks for to split n items (at least 1, at most n).
inline int range_threads(int threads, std::size_t n) {
  return static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(std::max(threads, 1)), std::max<std::size_t>(n, 1)));
}
// Where thread t of `count` starts in [0, n); thread t ends where t + 1 starts.
inline std::size_t range_begin(std::size_t n, int t, int count) {
  return n * static_cast<std::size_t>(t) / static_cast<std::size_t>(count);
}

// Calls fn(thread, begin, end) on `threads` threads; ranges cover [0, n) in order. Returns the
// number of threads that ran (partials [0, that) are valid).
template <class Fn>
int parallel_ranges(int threads, std::size_t n, Fn&& fn) {
  threads = range_threads(threads, n);
  if (threads == 1) {
    const FlushSubnormals flush;
    fn(0, std::size_t{0}, n);
    return 1;
  }
#pragma omp parallel num_threads(threads)
  {
    const FlushSubnormals flush;  // each worker has its own MXCSR
    const int t = omp_get_thread_num();
    const int count = omp_get_num_threads();
    fn(t, range_begin(n, t, count), range_begin(n, t + 1, count));
  }
  return threads;
}

// Element-wise loops: parallel only when there is enough work to pay for waking threads.
template <class Fn>
void parallel_elements(int threads, std::size_t n, Fn&& fn) {
  constexpr std::size_t kMinPerThread = 1 << 15;
  const int useful = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(threads), n / kMinPerThread + 1));
  parallel_ranges(useful, n, [&](int, std::size_t begin, std::size_t end) { fn(begin, end); });
}

}  // namespace cnn::cpu
