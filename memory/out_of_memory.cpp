#include <cnnengine/memory/out_of_memory.hpp>

#include <sstream>

#include <cnnengine/memory/memory_resource.hpp>

namespace cnn::memory {

std::string describe(const OutOfMemoryDetails& d) {
  std::ostringstream out;
  out << "out of memory in " << (d.resource.empty() ? "a resource" : d.resource) << ": asked for "
      << format_bytes(d.requested) << " of " << category_name(d.category);
  if (d.limit) out << " with a limit of " << format_bytes(d.limit);
  out << "; in use: " << format_bytes(d.in_use.total());
  bool any = false;
  for (std::size_t i = 0; i < kCategoryCount; ++i) {
    if (!d.in_use.bytes[i]) continue;
    out << (any ? ", " : " (") << category_name(static_cast<Category>(i)) << " "
        << format_bytes(d.in_use.bytes[i]);
    any = true;
  }
  if (any) out << ")";
  if (d.total_free) {
    out << "; free " << format_bytes(d.total_free) << ", largest free block "
        << format_bytes(d.largest_free_block) << ", fragmentation "
        << static_cast<int>(d.fragmentation() * 100.0 + 0.5) << "%";
  }
  return out.str();
}

OutOfMemory::OutOfMemory(OutOfMemoryDetails details)
    : Error(describe(details)), details_(std::move(details)) {}

OutOfMemory::OutOfMemory(std::string message, OutOfMemoryDetails details)
    : Error(std::move(message)), details_(std::move(details)) {}

}  // namespace cnn::memory
