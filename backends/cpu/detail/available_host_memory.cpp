#include "backends/cpu/detail/available_host_memory.hpp"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <optional>
#include <string>

namespace cnn::cpu {
namespace {

namespace fs = std::filesystem;

// The first whole number in a file ("max" and anything else: nothing).
std::optional<std::size_t> number_in(const fs::path& file) {
  std::ifstream in(file);
  std::string word;
  if (!(in >> word)) return std::nullopt;
  std::size_t value = 0;
  const auto [end, error] = std::from_chars(word.data(), word.data() + word.size(), value);
  if (error != std::errc() || end != word.data() + word.size()) return std::nullopt;
  return value;
}

std::optional<std::size_t> mem_available(const fs::path& root) {
  std::ifstream in(root / "proc/meminfo");
  std::string key;
  std::size_t kib = 0;
  std::string unit;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return kib * 1024;
  }
  return std::nullopt;
}

// What the control group still lets this process take: version 2 (one hierarchy, memory.max and
// memory.current in the process's group) or version 1 (the memory controller's limit and usage).
std::optional<std::size_t> cgroup_room(const fs::path& root) {
  std::ifstream in(root / "proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    const std::size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string group = line.substr(second + 1);
    fs::path folder;
    std::optional<std::size_t> limit, used;
    if (line.compare(0, first, "0") == 0 && controllers.empty()) {
      folder = root / "sys/fs/cgroup" / fs::path(group).relative_path();
      limit = number_in(folder / "memory.max");
      used = number_in(folder / "memory.current");
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      folder = root / "sys/fs/cgroup/memory" / fs::path(group).relative_path();
      limit = number_in(folder / "memory.limit_in_bytes");
      used = number_in(folder / "memory.usage_in_bytes");
    }
    if (limit && used) return *limit > *used ? *limit - *used : 0;
  }
  return std::nullopt;
}

}  // namespace

std::size_t available_host_memory(const fs::path& root) {
  const std::optional<std::size_t> available = mem_available(root), room = cgroup_room(root);
  if (available && room) return std::min(*available, *room);
  return available.value_or(room.value_or(0));
}

std::size_t available_host_memory() { return available_host_memory("/"); }

}  // namespace cnn::cpu
