#include "fit/metrics_file.hpp"

#include <cstdint>
#include <filesystem>
#include <system_error>

#include <cnnengine/base/error.hpp>

namespace cnn {

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

MetricsFile MetricsFile::written_whole(const std::string& path) {
  // A device or a pipe (what check_run_files lets a stream go to besides a file) takes a stream.
  std::error_code ec;
  const std::filesystem::file_type type = std::filesystem::status(path, ec).type();
  if (path.empty() || (type != std::filesystem::file_type::regular && type != std::filesystem::file_type::not_found))
    return MetricsFile(path);
  MetricsFile file;
  file.path_ = path;
  file.whole_ = std::make_unique<AtomicFile>(path);
  return file;
}

void MetricsFile::write(const nlohmann::json& line) {
  const std::string text = line.dump() + '\n';
  if (whole_) {
    whole_->write(text.data(), text.size());  // its error names the file
  } else {
    if (!out_.is_open()) return;
    out_ << text << std::flush;
    if (!out_) throw Error("writing the metrics file " + path_ + " failed (disk full?)");
  }
  bytes_ += text.size();
}

void MetricsFile::commit() {
  if (whole_) whole_->commit();
}

}  // namespace cnn
