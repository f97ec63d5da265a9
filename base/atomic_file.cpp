#include "base/atomic_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include <cnnengine/base/error.hpp>
#include "base/regular_file.hpp"

namespace cnn {

namespace fs = std::filesystem;

// weakly_canonical alone would take a link to a file not yet there for the file itself.
fs::path resolve_links(const fs::path& path) {
  std::error_code ec;
  fs::path current = fs::absolute(path, ec);
  if (ec) return path;
  for (int hops = 0; hops < 40 && fs::is_symlink(fs::symlink_status(current, ec)); ++hops) {
    const fs::path target = fs::read_symlink(current, ec);
    if (ec) break;
    current = target.is_absolute() ? target : current.parent_path() / target;
  }
  const fs::path canonical = fs::weakly_canonical(current, ec);
  return ec ? current : canonical;
}

namespace {

constexpr const char* kPrefix = ".cnnengine-";
constexpr const char* kSuffix = ".partial";

std::string errno_text() { return std::strerror(errno); }

fs::path folder_of(const fs::path& path) { return path.has_parent_path() ? path.parent_path() : fs::path("."); }

void sync_folder(const fs::path& folder) {
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // the rename happened; only its durability is left to the file system
  ::fsync(fd);
  ::close(fd);
}

// The pid in ".cnnengine-<pid>-<n>.partial", or 0.
pid_t owner_of(const std::string& name) {
  const std::string prefix = kPrefix, suffix = kSuffix;
  if (name.rfind(prefix, 0) != 0 || name.size() <= prefix.size() + suffix.size() ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return 0;
  try {
    return static_cast<pid_t>(std::stol(name.substr(prefix.size())));
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace

int AtomicFile::remove_stale_temporaries(const fs::path& folder) {
  int removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const pid_t pid = owner_of(it->path().filename().string());
    if (pid <= 0 || pid == ::getpid()) continue;
    if (::kill(pid, 0) == -1 && errno == ESRCH) {
      std::error_code ignored;
      if (fs::remove(it->path(), ignored)) ++removed;
    }
  }
  return removed;
}

namespace {

// Only a regular file, or nothing, may be replaced: a rename over a device, a FIFO or a socket
// would put a file where it was (as root, /dev/null). Checked on opening and again on commit.
void check_replaceable(const fs::path& target) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(target, ec))) return;
  if (const std::string problem = regular_file_problem(target); !problem.empty())
    throw Error("cannot replace " + target.string() + ": it " + problem);
}

}  // namespace

AtomicFile::AtomicFile(const fs::path& target) : target_(resolve_links(target)) {
  check_replaceable(target_);
  static std::atomic<unsigned> counter{0};
  const fs::path folder = folder_of(target_);
  remove_stale_temporaries(folder);
  temporary_ = folder / (kPrefix + std::to_string(::getpid()) + "-" + std::to_string(counter++) + kSuffix);
  fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error("cannot create a file in " + folder.string() + " to write " + target_.string() + ": " + errno_text());
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temporary_.c_str());
}

namespace {

// Test hook: CNN_TEST_KILL_AFTER_BYTES=N ends the process with SIGKILL once N bytes have gone
// through AtomicFile::write in this process, what a kill -9 in the middle of a save leaves.
void die_after(std::size_t bytes) {
  static const unsigned long long limit = [] {
    const char* text = std::getenv("CNN_TEST_KILL_AFTER_BYTES");
    return text ? std::strtoull(text, nullptr, 10) : 0ULL;
  }();
  static std::atomic<unsigned long long> written{0};
  if (limit && (written += bytes) >= limit) ::kill(::getpid(), SIGKILL);
}

// Test hook: CNN_TEST_FAIL_AFTER_BYTES=N makes AtomicFile::write fail as a full disk does
// (ENOSPC) once N bytes have gone through it in this process; /dev/full cannot be renamed over.
bool disk_full_after(std::size_t bytes) {
  static const unsigned long long limit = [] {
    const char* text = std::getenv("CNN_TEST_FAIL_AFTER_BYTES");
    return text ? std::strtoull(text, nullptr, 10) : 0ULL;
  }();
  static std::atomic<unsigned long long> written{0};
  return limit && (written += bytes) >= limit;
}

}  // namespace

void AtomicFile::write(const void* data, std::size_t bytes) {
  die_after(bytes);
  if (disk_full_after(bytes)) {
    errno = ENOSPC;
    throw Error("writing " + target_.string() + " failed: " + errno_text());
  }
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t written = ::write(fd_, p, bytes);
    if (written < 0 && errno == EINTR) continue;  // a signal arrived: go on
    if (written <= 0) throw Error("writing " + target_.string() + " failed: " + errno_text());
    p += written;
    bytes -= static_cast<std::size_t>(written);
  }
}

void AtomicFile::commit() {
  if (::fsync(fd_) != 0) throw Error("writing " + target_.string() + " failed: " + errno_text());
  const int closed = ::close(fd_);
  fd_ = -1;
  if (closed != 0) throw Error("writing " + target_.string() + " failed: " + errno_text());
  check_replaceable(target_);
  if (::rename(temporary_.c_str(), target_.c_str()) != 0)
    throw Error("cannot replace " + target_.string() + ": " + errno_text());
  committed_ = true;
  sync_folder(folder_of(target_));
}

}  // namespace cnn
