#include "backends/cpu/detail/available_host_memory.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
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

// The least room a limit leaves along a control group and each of its ancestors, up to the
// hierarchy's root: a limit on a parent (a systemd slice, a container's group, a job scheduler's
// allocation) caps every group below it, whose own files may say "max". A level counts where it
// has both a limit and a usage (the usage of a parent includes its children's).
std::optional<std::size_t> room_along(const fs::path& hierarchy, const std::string& group, const char* limit_file,
                                      const char* usage_file) {
  std::optional<std::size_t> least;
  for (fs::path level = fs::path(group).lexically_normal().relative_path();; level = level.parent_path()) {
    if (!level.empty() && *level.begin() == "..") break;  // never above the hierarchy
    const fs::path folder = hierarchy / level;
    const std::optional<std::size_t> limit = number_in(folder / limit_file), used = number_in(folder / usage_file);
    if (limit && used) least = std::min(least.value_or(SIZE_MAX), *limit > *used ? *limit - *used : 0);
    if (level.empty()) break;
  }
  return least;
}

// What the control groups still let this process take: version 2 (one hierarchy, memory.max and
// memory.current) and version 1 (the memory controller's limit and usage), the least of them.
std::optional<std::size_t> cgroup_room(const fs::path& root) {
  std::ifstream in(root / "proc/self/cgroup");
  std::string line;
  std::optional<std::size_t> least;
  while (std::getline(in, line)) {
    const std::size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string group = line.substr(second + 1);
    std::optional<std::size_t> room;
    if (line.compare(0, first, "0") == 0 && controllers.empty())
      room = room_along(root / "sys/fs/cgroup", group, "memory.max", "memory.current");
    else if (("," + controllers + ",").find(",memory,") != std::string::npos)
      room = room_along(root / "sys/fs/cgroup/memory", group, "memory.limit_in_bytes", "memory.usage_in_bytes");
    if (room) least = std::min(least.value_or(SIZE_MAX), *room);
  }
  return least;
}

}  // namespace

std::size_t available_host_memory(const fs::path& root) {
  const std::optional<std::size_t> available = mem_available(root), room = cgroup_room(root);
  if (available && room) return std::min(*available, *room);
  return available.value_or(room.value_or(0));
}

std::size_t available_host_memory() { return available_host_memory("/"); }

}  // namespace cnn::cpu
