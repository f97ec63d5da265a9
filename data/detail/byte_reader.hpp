#pragma once
// Sequential reading of a file that may be gzip-compressed: the first two bytes (1f 8b) decide,
// not the name. Every failure, a broken gzip stream included, is a DataError naming the file.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>

namespace cnn::data {

// The 32-bit big-endian number at `b` (IDX headers, PNG chunks).
inline std::uint32_t big_endian_u32(const unsigned char* b) {
  return (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) | b[3];
}

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
