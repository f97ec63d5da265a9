#pragma once
// --metrics-out: one JSON object a line, flushed as written. A line that cannot be written
// (disk full, /dev/full) is an error naming the file, not output silently lost.
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace cnn::app {

class MetricsFile {
 public:
  // An empty path writes nothing.
  explicit MetricsFile(const std::string& path);
  void write(const nlohmann::json& line);

 private:
  std::string path_;
  std::ofstream out_;
};

}  // namespace cnn::app
