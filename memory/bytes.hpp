#pragma once
// Human-readable byte counts: "512MiB" in, "12.3 MiB" out.
#include <cstddef>
#include <string>
#include <string_view>

namespace cnn::memory {

// Accepts a plain number of bytes or a number with B, KB/KiB, MB/MiB, GB/GiB, TB/TiB
// (case-insensitive; KB means 1000, KiB 1024): the units format_bytes writes. Throws ConfigError naming the text on anything else.
std::size_t parse_bytes(std::string_view text);
std::string format_bytes(std::size_t bytes);

inline std::size_t align_up(std::size_t value, std::size_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

}  // namespace cnn::memory
