#pragma once
// A file written whole or not at all. The bytes go to a temporary file beside the target, which
// commit() flushes to the disk (fsync), renames over the target and makes durable (fsync of the
// folder): a crash, a kill, a power loss or a full disk never leaves a half-written file where a
// good one was. The target is resolved through symbolic links first, so a link keeps naming the
// file and the file it names is the one replaced. The temporary's name is short and unique
// (".cnnengine-<pid>-<n>.partial"), so a target whose name is near the file-name limit works;
// temporaries left by processes that no longer run (a kill -9) are removed when a new one is made.
#include <cstddef>
#include <filesystem>
#include <string>

namespace cnn {

// The file `path` names, through any chain of symbolic links (a link to a file not there yet
// included), as an absolute path: where AtomicFile writes.
std::filesystem::path resolve_links(const std::filesystem::path& path);

class AtomicFile {
 public:
  // Creates the temporary; throws cnn::Error saying why it cannot.
  explicit AtomicFile(const std::filesystem::path& target);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();  // removes the temporary unless committed

  // Throws cnn::Error (a full disk, an I/O error); the target stays as it was.
  void write(const void* data, std::size_t bytes);
  void commit();

  const std::filesystem::path& target() const { return target_; }  // symbolic links resolved
  const std::filesystem::path& temporary() const { return temporary_; }

  // Removes the temporaries of processes that no longer run from `folder`. Returns how many.
  static int remove_stale_temporaries(const std::filesystem::path& folder);

 private:
  std::filesystem::path target_, temporary_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace cnn
