#pragma once
// A metrics file: one JSON object a line. A line that cannot be written (disk full, /dev/full) is
// an error naming the file, not output silently lost.
//
// A training run (Fit) streams its file, flushed line by line: it can be watched as it grows, and
// a run killed at any moment leaves the lines up to the kill, which a resumed run cuts back to
// what its checkpoint saw and goes on from. A command that writes its lines at once
// (train_images --evaluate, --predict) writes the file whole: to a temporary beside it, renamed over it by commit(), so a
// command that fails leaves the previous file as it was. A device (/dev/null, a terminal's
// /dev/stdout) or our own pipe (/dev/stdout piped) is written directly either way.
#include <cstdint>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "base/atomic_file.hpp"

namespace cnn {

class MetricsFile {
 public:
  // Streamed. An empty path writes nothing. Otherwise the file starts empty, or, for a resumed
  // run, keeps its first `keep_bytes` (what the run had written when its checkpoint was saved)
  // when it holds that many; `kept` tells which.
  explicit MetricsFile(const std::string& path, std::uint64_t keep_bytes = 0);
  // Written whole by commit(); nothing reaches `path` without it.
  static MetricsFile written_whole(const std::string& path);

  void write(const nlohmann::json& line);
  // Where written whole: the lines replace the file (throws cnn::Error, the file unchanged).
  void commit();
  bool kept() const { return kept_; }
  // Whether lines go anywhere (an empty path writes nothing): a caller may skip building them.
  bool active() const { return whole_ != nullptr || out_.is_open(); }
  // Bytes in the file so far (what a checkpoint records).
  std::uint64_t bytes() const { return bytes_; }

 private:
  MetricsFile() = default;

  std::string path_;
  std::ofstream out_;
  std::unique_ptr<AtomicFile> whole_;
  std::uint64_t bytes_ = 0;
  bool kept_ = false;
};

}  // namespace cnn
