#include "heap_counter.hpp"

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#define CNN_TEST_ADDRESS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CNN_TEST_ADDRESS_SANITIZER 1
#endif
#endif

namespace {
std::atomic<long> g_allocations{0};
void count() { g_allocations.fetch_add(1, std::memory_order_relaxed); }
}  // namespace

long cnn::testing::heap_allocations() { return g_allocations.load(std::memory_order_relaxed); }

#if defined(CNN_TEST_ADDRESS_SANITIZER)

// Under AddressSanitizer the heap is ASan's: replacing malloc would run before ASan is set up and
// bypass its checks. Its allocator calls this hook, which the sanitizers declare weak for a
// program to define, on every allocation by any route instead. (GCC 12's libasan refuses
// __sanitizer_install_malloc_and_free_hooks: it returns 0 and calls nothing.)
extern "C" void __sanitizer_malloc_hook(const volatile void*, std::size_t) { count(); }

#else

// glibc's own entry points: the replacements below count, then forward to them.
extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
void __libc_free(void*);
}

extern "C" {
void* malloc(std::size_t n) {
  count();
  return __libc_malloc(n);
}
void* calloc(std::size_t n, std::size_t size) {
  count();
  return __libc_calloc(n, size);
}
void* realloc(void* p, std::size_t n) {
  count();
  return __libc_realloc(p, n);
}
void* memalign(std::size_t alignment, std::size_t n) {
  count();
  return __libc_memalign(alignment, n);
}
void* aligned_alloc(std::size_t alignment, std::size_t n) {
  count();
  return __libc_memalign(alignment, n);
}
int posix_memalign(void** out, std::size_t alignment, std::size_t n) {
  count();
  void* p = __libc_memalign(alignment, n);
  if (!p && n) return ENOMEM;
  *out = p;
  return 0;
}
void free(void* p) { __libc_free(p); }
}

// operator new goes through malloc above, and is counted there.
void* operator new(std::size_t n) {
  if (void* p = malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { free(p); }
void operator delete(void* p, std::size_t) noexcept { free(p); }

#endif
