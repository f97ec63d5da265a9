// The heap counter itself: the zero-allocation checks that use it pass vacuously if it counts
// nothing (the sanitized build counts through another route than the plain one).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <new>

#include "heap_counter.hpp"

namespace {
void* volatile g_escaped = nullptr;  // what is allocated escapes, so no call is left out
}  // namespace

TEST_CASE("the heap counter counts operator new and the C allocation functions", "[memory]") {
  long before = cnn::testing::heap_allocations();
  g_escaped = new int(1);
  delete static_cast<int*>(g_escaped);
  CHECK(cnn::testing::heap_allocations() >= before + 1);

  before = cnn::testing::heap_allocations();
  g_escaped = std::malloc(24);
  std::free(g_escaped);
  g_escaped = std::calloc(3, 8);
  std::free(g_escaped);
  g_escaped = std::aligned_alloc(64, 128);
  std::free(g_escaped);
  CHECK(cnn::testing::heap_allocations() >= before + 3);
}
