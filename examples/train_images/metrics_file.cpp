#include "metrics_file.hpp"

#include <stdexcept>

namespace cnn::app {

MetricsFile::MetricsFile(const std::string& path) : path_(path) {
  if (path.empty()) return;
  out_.open(path, std::ios::trunc);
  if (!out_) throw std::runtime_error("cannot write the metrics file " + path);
}

void MetricsFile::write(const nlohmann::json& line) {
  if (!out_.is_open()) return;
  out_ << line.dump() << '\n' << std::flush;
  if (!out_) throw std::runtime_error("writing the metrics file " + path_ + " failed (disk full?)");
}

}  // namespace cnn::app
