#pragma once
// Sequential reading of a file that may be gzip-compressed: the first two bytes (1f 8b) decide,
// not the name. Every failure, a broken gzip stream included, is a DataError naming the file.
//
// A gzip file is a series of members (RFC 1952, 2.2; `cat a.gz b.gz` is one): their data is read
// as one stream. Anything after the last member that is not another member (garbage, zero
// padding) is an error, not ignored as zlib's gzread would.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

namespace cnn::data {

// The 32-bit big-endian number at `b` (IDX headers, PNG chunks).
inline std::uint32_t big_endian_u32(const unsigned char* b) {
  return (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) | b[3];
}

// Deflate expands its input at most 1032 times (a 258-byte match coded in 2 bits), so a gzip
// file cannot inflate to more than this many bytes per byte on disk.
inline constexpr std::uint64_t kMaxDeflateRatio = 1032;

class ByteReader {
 public:
  explicit ByteReader(const std::filesystem::path& path);
  ~ByteReader();
  ByteReader(const ByteReader&) = delete;
  ByteReader& operator=(const ByteReader&) = delete;

  // Reads up to `bytes` bytes; fewer only at the end of the (decompressed) data.
  std::size_t read(void* out, std::size_t bytes);
  // Reads on towards the end, `at_most` bytes at most (a bomb's tail is not inflated whole),
  // and returns how many it read.
  std::size_t skip_to_end(std::size_t at_most);
  bool compressed() const { return gzip_ != nullptr; }
  // The size on disk (compressed, for gzip).
  std::uint64_t file_bytes() const { return file_bytes_; }
  // What the gzip trailer says the data holds, modulo 2^32 (its last member only). A hint to
  // size buffers, never a promise: the file may lie.
  std::optional<std::uint32_t> gzip_size_hint() const { return gzip_size_hint_; }

 private:
  struct Gzip;
  std::size_t read_raw(unsigned char* out, std::size_t bytes);
  std::size_t inflate_some(unsigned char* out, std::size_t bytes);
  bool refill();
  void start_next_member_or_end();

  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
  std::uint64_t file_bytes_ = 0;
  std::optional<std::uint32_t> gzip_size_hint_;
  std::unique_ptr<Gzip> gzip_;
};

}  // namespace cnn::data
