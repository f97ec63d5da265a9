#pragma once
// The alignments every resource honours: powers of two up to one page.
#include <cstddef>
#include <stdexcept>
#include <string>

#include <cnnengine/base/error.hpp>
#include <cnnengine/memory/memory_resource.hpp>

namespace cnn::memory {

inline constexpr std::size_t kMaxAlignment = 4096;

constexpr bool is_power_of_two(std::size_t value) { return value && !(value & (value - 1)); }

// Throws ConfigError naming the resource when `alignment` is not a power of two
// or exceeds kMaxAlignment.
inline void check_alignment(std::size_t alignment, const MemoryResource& resource) {
  if (!is_power_of_two(alignment) || alignment > kMaxAlignment)
    throw ConfigError(resource.name() + ": alignment " + std::to_string(alignment) +
                      " is not a power of two up to " + std::to_string(kMaxAlignment));
}

}  // namespace cnn::memory
