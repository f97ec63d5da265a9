#pragma once
// How much host memory this process could still take: the kernel's MemAvailable, less where a
// control group the process is in, or any group above it (a container, a systemd slice, a job
// scheduler's allocation), caps it lower.
#include <cstddef>
#include <filesystem>

namespace cnn::cpu {

// 0 when nothing can be read (not Linux, /proc not mounted).
std::size_t available_host_memory();
// The same, read under `root` (a fake /proc and /sys for tests): root/proc/meminfo,
// root/proc/self/cgroup, root/sys/fs/cgroup/...
std::size_t available_host_memory(const std::filesystem::path& root);

}  // namespace cnn::cpu
