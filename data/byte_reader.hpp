#pragma once
// Sequential reading of a file that may be gzip-compressed: the first two bytes (1f 8b) decide,
// not the name. Every failure, a broken gzip stream included, is a DataError naming the file.
#include <cstddef>
#include <cstdio>
#include <filesystem>

namespace cnn::data {

class ByteReader {
 public:
  explicit ByteReader(const std::filesystem::path& path);
  ~ByteReader();
  ByteReader(const ByteReader&) = delete;
  ByteReader& operator=(const ByteReader&) = delete;

  // Reads up to `bytes` bytes; fewer only at the end of the (decompressed) data.
  std::size_t read(void* out, std::size_t bytes);
  // Reads to the end and returns how many bytes were left.
  std::size_t skip_to_end();
  bool compressed() const { return gz_ != nullptr; }

 private:
  std::filesystem::path path_;
  std::FILE* raw_ = nullptr;
  void* gz_ = nullptr;  // gzFile, kept opaque so that zlib.h stays out of this header
};

}  // namespace cnn::data
