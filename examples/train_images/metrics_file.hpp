#pragma once
// --metrics-out: one JSON object a line, flushed as written. A line that cannot be written
// (disk full, /dev/full) is an error naming the file, not output silently lost.
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace cnn::app {

class MetricsFile {
 public:
  // An empty path writes nothing. Otherwise the file starts empty, or, for a resumed run, keeps
  // its first `keep_bytes` (what the run had written when its checkpoint was saved) when it
  // holds that many; `kept` tells which.
  explicit MetricsFile(const std::string& path, std::uint64_t keep_bytes = 0);
  void write(const nlohmann::json& line);
  bool kept() const { return kept_; }
  // Bytes in the file so far (what a checkpoint records).
  std::uint64_t bytes() const { return bytes_; }

 private:
  std::string path_;
  std::ofstream out_;
  std::uint64_t bytes_ = 0;
  bool kept_ = false;
};

}  // namespace cnn::app
