#pragma once
// Counts every heap allocation this test program makes, by any route: operator new and the C
// allocation functions (malloc, calloc, realloc, the aligned ones), which libraries such as
// Eigen and libgomp call directly. tests/heap_counter.cpp replaces them for the whole program, or,
// under AddressSanitizer (whose allocator must stay in place), counts through its allocation hook.
namespace cnn::testing {

long heap_allocations();

}  // namespace cnn::testing
