#include "backends/cpu/detail/available_host_memory.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "backends/cpu/cpu_backend.hpp"

namespace {

namespace fs = std::filesystem;

// A fake root holding /proc and /sys files for available_host_memory(root).
struct FakeRoot {
  fs::path root = fs::temp_directory_path() / ("cnn_host_memory_" + std::to_string(::getpid()));
  FakeRoot() { fs::remove_all(root); }
  ~FakeRoot() { fs::remove_all(root); }
  void write(const fs::path& file, const std::string& text) const {
    fs::create_directories((root / file).parent_path());
    std::ofstream(root / file) << text;
  }
};

constexpr std::size_t kKiB = 1024;

}  // namespace

TEST_CASE("available host memory is MemAvailable without a control group limit", "[backends]") {
  FakeRoot f;
  f.write("proc/meminfo", "MemTotal:       24000000 kB\nMemFree:  1000 kB\nMemAvailable:   20000000 kB\n");
  CHECK(cnn::cpu::available_host_memory(f.root) == 20000000 * kKiB);
  f.write("proc/self/cgroup", "0::/user.slice\n");
  f.write("sys/fs/cgroup/user.slice/memory.max", "max\n");
  f.write("sys/fs/cgroup/user.slice/memory.current", "5000\n");
  CHECK(cnn::cpu::available_host_memory(f.root) == 20000000 * kKiB);
}

TEST_CASE("available host memory is what the control group leaves where that is less", "[backends]") {
  FakeRoot f;
  f.write("proc/meminfo", "MemAvailable:   20000000 kB\n");
  SECTION("version 2") {
    f.write("proc/self/cgroup", "0::/job/42\n");
    f.write("sys/fs/cgroup/job/42/memory.max", "4294967296\n");
    f.write("sys/fs/cgroup/job/42/memory.current", "1073741824\n");
    CHECK(cnn::cpu::available_host_memory(f.root) == std::size_t{3} << 30);
  }
  SECTION("version 1") {
    f.write("proc/self/cgroup", "5:cpu,cpuacct:/x\n4:memory:/docker/abc\n");
    f.write("sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "2147483648\n");
    f.write("sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes", "3000000000\n");  // over: nothing left
    CHECK(cnn::cpu::available_host_memory(f.root) == 0);
  }
}

TEST_CASE("available host memory is 0 where nothing can be read, and the CPU backend reports this machine's",
          "[backends]") {
  FakeRoot f;
  CHECK(cnn::cpu::available_host_memory(f.root) == 0);
  f.write("proc/meminfo", "MemAvailable: not a number\n");
  CHECK(cnn::cpu::available_host_memory(f.root) == 0);
  cnn::CpuBackend cpu(1);
  CHECK(cpu.available_memory() > 0);
}

TEST_CASE("available host memory is the tightest limit along the control group's ancestors", "[backends]") {
  FakeRoot f;
  f.write("proc/meminfo", "MemAvailable:   20000000 kB\n");
  // A group's limit and usage: version 2's files, or version 1's under the memory controller.
  auto v2 = [&](const std::string& group, const std::string& max, const std::string& current) {
    f.write("sys/fs/cgroup/" + group + "/memory.max", max + "\n");
    f.write("sys/fs/cgroup/" + group + "/memory.current", current + "\n");
  };
  auto v1 = [&](const std::string& group, const std::string& limit, const std::string& usage) {
    f.write("sys/fs/cgroup/memory/" + group + "/memory.limit_in_bytes", limit + "\n");
    f.write("sys/fs/cgroup/memory/" + group + "/memory.usage_in_bytes", usage + "\n");
  };
  SECTION("version 2: a 200 MiB slice above a group without a limit of its own") {
    f.write("proc/self/cgroup", "0::/limited.slice/run.scope\n");
    v2("limited.slice", "209715200", "10485760");
    v2("limited.slice/run.scope", "max", "5000");
    CHECK(cnn::cpu::available_host_memory(f.root) == 199229440);
  }
  SECTION("version 2: the group's own limit where it is the tighter") {
    f.write("proc/self/cgroup", "0::/a/b\n");
    v2("a", "4294967296", "0");
    v2("a/b", "1073741824", "0");
    CHECK(cnn::cpu::available_host_memory(f.root) == std::size_t{1} << 30);
  }
  SECTION("version 1: a parent's limit") {
    f.write("proc/self/cgroup", "4:memory:/docker/abc\n");
    v1("docker", "536870912", "0");
    v1("docker/abc", "9223372036854771712", "1000");
    CHECK(cnn::cpu::available_host_memory(f.root) == std::size_t{512} << 20);
  }
  SECTION("both hierarchies: the tighter") {
    f.write("proc/self/cgroup", "4:memory:/v1\n0::/v2\n");
    v1("v1", "3000", "1000");
    v2("v2", "5000", "1000");
    CHECK(cnn::cpu::available_host_memory(f.root) == 2000);
  }
  SECTION("a group path that climbs out of the hierarchy reads nothing above it") {
    f.write("proc/self/cgroup", "0::/../../etc\n");
    CHECK(cnn::cpu::available_host_memory(f.root) == 20000000 * kKiB);
  }
}
