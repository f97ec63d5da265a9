#include "metrics_file.hpp"

#include <filesystem>
#include <system_error>

#include "cnnengine/base/error.hpp"

namespace cnn::app {

MetricsFile::MetricsFile(const std::string& path, std::uint64_t keep_bytes) : path_(path) {
  if (path.empty()) return;
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (keep_bytes > 0 && !ec && size >= keep_bytes) {
    std::filesystem::resize_file(path, keep_bytes, ec);  // what came after the checkpoint goes
    kept_ = !ec;
  }
  out_.open(path, kept_ ? std::ios::app : std::ios::trunc);
  if (!out_) throw Error("cannot write the metrics file " + path);
  bytes_ = kept_ ? keep_bytes : 0;
}

void MetricsFile::write(const nlohmann::json& line) {
  if (!out_.is_open()) return;
  const std::string text = line.dump() + '\n';
  out_ << text << std::flush;
  if (!out_) throw Error("writing the metrics file " + path_ + " failed (disk full?)");
  bytes_ += text.size();
}

}  // namespace cnn::app
