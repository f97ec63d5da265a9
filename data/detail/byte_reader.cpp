#include "cnnengine/data/detail/byte_reader.hpp"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "cnnengine/data/data_error.hpp"

namespace cnn::data {
namespace {

bool starts_with_gzip_magic(std::FILE* file) {
  unsigned char magic[2] = {0, 0};
  std::size_t got = std::fread(magic, 1, 2, file);
  return got == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}

// zlib's message, without the "<path>: " it starts with.
std::string zlib_reason(const char* message, const std::filesystem::path& path) {
  std::string text = message ? message : "unknown zlib error";
  const std::string prefix = path.string() + ": ";
  return text.rfind(prefix, 0) == 0 ? text.substr(prefix.size()) : text;
}

}  // namespace

ByteReader::ByteReader(const std::filesystem::path& path) : path_(path) {
  require_regular_file(path);
  raw_ = std::fopen(path.c_str(), "rb");
  if (!raw_) fail(path, std::string("cannot open: ") + std::strerror(errno));
  if (!starts_with_gzip_magic(raw_)) {
    std::rewind(raw_);
    return;
  }
  std::fclose(raw_);
  raw_ = nullptr;
  gzFile gz = gzopen(path.c_str(), "rb");
  if (!gz) fail(path, "cannot open gzip stream");
  gzbuffer(gz, 1 << 17);
  gz_ = gz;
}

ByteReader::~ByteReader() {
  if (raw_) std::fclose(raw_);
  if (gz_) gzclose(static_cast<gzFile>(gz_));
}

std::size_t ByteReader::read(void* out, std::size_t bytes) {
  auto* dst = static_cast<unsigned char*>(out);
  std::size_t total = 0;
  while (total < bytes) {
    std::size_t chunk = std::min<std::size_t>(bytes - total, std::size_t{1} << 30);
    std::size_t got = 0;
    if (raw_) {
      got = std::fread(dst + total, 1, chunk, raw_);
      if (got < chunk && std::ferror(raw_)) fail(path_, std::string("read error: ") + std::strerror(errno));
    } else {
      auto gz = static_cast<gzFile>(gz_);
      int n = gzread(gz, dst + total, static_cast<unsigned>(chunk));
      int code = Z_OK;
      const char* message = gzerror(gz, &code);
      // A stream cut short reads as end of data with Z_BUF_ERROR set, not as n < 0.
      if (n < 0 || (code != Z_OK && code != Z_STREAM_END))
        fail(path_, "corrupt or truncated gzip data: " + zlib_reason(message, path_));
      got = static_cast<std::size_t>(n);
    }
    total += got;
    if (got < chunk) break;
  }
  return total;
}

std::size_t ByteReader::skip_to_end() {
  std::vector<unsigned char> buffer(1 << 16);
  std::size_t total = 0;
  for (;;) {
    std::size_t got = read(buffer.data(), buffer.size());
    total += got;
    if (got < buffer.size()) return total;
  }
}

}  // namespace cnn::data
