#include "cnnengine/data/detail/idx_file.hpp"

#include <algorithm>
#include <cstdio>

#include "cnnengine/data/data_error.hpp"
#include "cnnengine/data/detail/byte_reader.hpp"

namespace cnn::data {
namespace {

constexpr std::uint8_t kUnsignedByteType = 0x08;

std::string hex32(std::uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08X", value);
  return text;
}

std::string bytes_text(std::size_t n) { return std::to_string(n) + (n == 1 ? " byte" : " bytes"); }

// Reads exactly `expected` bytes, growing the buffer as data arrives so that a header that
// claims far more than the file holds cannot make us allocate it.
std::vector<std::uint8_t> read_payload(ByteReader& in, const std::filesystem::path& path,
                                       std::size_t expected, const std::string& what) {
  constexpr std::size_t kFirstChunk = std::size_t{64} << 20;
  std::vector<std::uint8_t> data;
  std::size_t have = 0;
  while (have < expected) {
    std::size_t next = std::min(expected, std::max(kFirstChunk, 2 * have));
    data.resize(next);
    std::size_t got = in.read(data.data() + have, next - have);
    have += got;
    if (have < next) {
      fail(path, "truncated: expected " + bytes_text(expected) + " of " + what + ", found " +
                     std::to_string(have));
    }
  }
  if (std::size_t extra = in.skip_to_end(); extra > 0) {
    fail(path, "trailing data: expected " + bytes_text(expected) + " of " + what + ", found " +
                   std::to_string(expected + extra));
  }
  return data;
}

}  // namespace

IdxArray read_idx(const std::filesystem::path& path, int rank, const std::string& what) {
  ByteReader in(path);
  const std::uint32_t expected_magic = (std::uint32_t{kUnsignedByteType} << 8) | static_cast<std::uint32_t>(rank);

  unsigned char header[4];
  std::size_t got = in.read(header, 4);
  if (got < 4) fail(path, "truncated: expected a 4-byte IDX magic number, found " + bytes_text(got));
  std::uint32_t magic = big_endian_u32(header);
  if ((magic >> 8) != kUnsignedByteType) {
    fail(path, "bad magic number: expected " + hex32(expected_magic) + " (IDX, unsigned bytes, " +
                   std::to_string(rank) + " dimensions), found " + hex32(magic));
  }
  if ((magic & 0xFF) != static_cast<std::uint32_t>(rank)) {
    fail(path, "wrong dimension count: expected " + std::to_string(rank) + " (magic " +
                   hex32(expected_magic) + "), found " + std::to_string(magic & 0xFF) + " (magic " +
                   hex32(magic) + ")");
  }

  IdxArray array;
  std::size_t expected = 1;
  for (int d = 0; d < rank; ++d) {
    unsigned char b[4];
    got = in.read(b, 4);
    if (got < 4) {
      fail(path, "truncated header: expected " + std::to_string(rank) + " dimension sizes of 4 bytes, file ends in dimension " +
                     std::to_string(d));
    }
    std::uint32_t size = big_endian_u32(b);
    if (size == 0) fail(path, "dimension " + std::to_string(d) + " is 0: expected a nonzero size");
    if (size > 0x7FFFFFFFu || __builtin_mul_overflow(expected, std::size_t{size}, &expected))
      fail(path, "dimension " + std::to_string(d) + " of " + std::to_string(size) + " is too large");
    array.dims.push_back(size);
  }
  array.data = read_payload(in, path, expected, what);
  return array;
}

}  // namespace cnn::data
