#pragma once
// Static work splitting over threads. The work is cut into one contiguous range per thread, and
// each range has its own index, so per-range partial results can be reduced in a fixed order
// (deterministic output). The calling thread and the pool's workers claim the ranges
// (Note [Work that waits for no one]); every thread runs its share with subnormals flushed
// (Note [Flushed subnormals]).
#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "backends/cpu/detail/subnormals.hpp"
#include "backends/cpu/detail/work_pool.hpp"

namespace cnn::cpu {

// How many ranges parallel_ranges cuts n items into for `threads` threads (at least 1, at most n).
inline int range_threads(int threads, std::size_t n) {
  return static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(std::max(threads, 1)), std::max<std::size_t>(n, 1)));
}
// Where range t of `count` starts in [0, n); range t ends where t + 1 starts.
inline std::size_t range_begin(std::size_t n, int t, int count) {
  return n * static_cast<std::size_t>(t) / static_cast<std::size_t>(count);
}

// Calls fn(range, begin, end) once for each of range_threads(threads, n) ranges covering [0, n)
// in order, on up to that many threads; which thread runs a range is not fixed. Returns the
// number of ranges (partials [0, that) are valid).
template <class Fn>
int parallel_ranges(int threads, std::size_t n, Fn&& fn) {
  const int count = range_threads(threads, n);
  const FlushSubnormals flush;  // the pool's workers flush for good
  if (count == 1) {
    fn(0, std::size_t{0}, n);
    return 1;
  }
  struct Job {
    std::remove_reference_t<Fn>* fn;
    std::size_t n;
    int count;
  } job{&fn, n, count};
  WorkPool::instance().run(count, [](void* context, int r) {
    const Job& j = *static_cast<const Job*>(context);
    (*j.fn)(r, range_begin(j.n, r, j.count), range_begin(j.n, r + 1, j.count));
  }, &job);
  return count;
}

// Element-wise loops: parallel only when there is enough work to pay for waking threads.
template <class Fn>
void parallel_elements(int threads, std::size_t n, Fn&& fn) {
  constexpr std::size_t kMinPerThread = 1 << 15;
  const int useful = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(threads), n / kMinPerThread + 1));
  parallel_ranges(useful, n, [&](int, std::size_t begin, std::size_t end) { fn(begin, end); });
}

}  // namespace cnn::cpu
