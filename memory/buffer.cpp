#include "memory/buffer.hpp"

#include <atomic>
#include <cstdio>
#include <exception>

namespace cnn::memory {
namespace {
std::atomic<std::size_t> failed{0};

void report(const MemoryResource& resource, std::size_t bytes, const char* what) noexcept {
  failed.fetch_add(1);
  try {
    std::fprintf(stderr, "cnnengine: %s refused to take back a block of %zu bytes (%s); it is forgotten\n",
                 resource.name().c_str(), bytes, what);
  } catch (...) {  // name() could not allocate: the count alone
  }
}

}  // namespace

std::size_t failed_releases() { return failed.load(); }

void give_back(MemoryResource& resource, void* ptr, std::size_t bytes, std::size_t alignment,
               Category category) noexcept {
  try {
    resource.deallocate(ptr, bytes, alignment, category);
  } catch (const std::exception& e) {
    report(resource, bytes, e.what());
  } catch (...) {
    report(resource, bytes, "an unknown exception");
  }
}

}  // namespace cnn::memory
