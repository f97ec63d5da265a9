#include "data/detail/idx_file.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <new>

#include "data/data_error.hpp"
#include "data/detail/byte_reader.hpp"

namespace cnn::data {
namespace {

constexpr std::uint8_t kUnsignedByteType = 0x08;

std::string hex32(std::uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08X", value);
  return text;
}

std::string bytes_text(std::uint64_t n) { return std::to_string(n) + (n == 1 ? " byte" : " bytes"); }

std::uint64_t header_bytes(int rank) { return 4 + 4 * static_cast<std::uint64_t>(rank); }

void check_magic(ByteReader& in, const std::filesystem::path& path, int rank) {
  const std::uint32_t expected_magic = (std::uint32_t{kUnsignedByteType} << 8) | static_cast<std::uint32_t>(rank);
  unsigned char header[4];
  const std::size_t got = in.read(header, 4);
  if (got < 4) fail(path, "truncated: expected a 4-byte IDX magic number, found " + bytes_text(got));
  const std::uint32_t magic = big_endian_u32(header);
  if ((magic >> 8) != kUnsignedByteType) {
    fail(path, "bad magic number: expected " + hex32(expected_magic) + " (IDX, unsigned bytes, " +
                   std::to_string(rank) + " dimensions), found " + hex32(magic));
  }
  if ((magic & 0xFF) != static_cast<std::uint32_t>(rank)) {
    fail(path, "wrong dimension count: expected " + std::to_string(rank) + " (magic " + hex32(expected_magic) +
                   "), found " + std::to_string(magic & 0xFF) + " (magic " + hex32(magic) + ")");
  }
}

// The dimensions, and their product in `elements`.
std::vector<std::uint32_t> read_dims(ByteReader& in, const std::filesystem::path& path, int rank,
                                     std::uint64_t& elements) {
  std::vector<std::uint32_t> dims;
  elements = 1;
  for (int d = 0; d < rank; ++d) {
    unsigned char b[4];
    if (in.read(b, 4) < 4) {
      fail(path, "truncated header: expected " + std::to_string(rank) +
                     " dimension sizes of 4 bytes, file ends in dimension " + std::to_string(d));
    }
    const std::uint32_t size = big_endian_u32(b);
    if (size == 0) fail(path, "dimension " + std::to_string(d) + " is 0: expected a nonzero size");
    if (size > 0x7FFFFFFFu || __builtin_mul_overflow(elements, std::uint64_t{size}, &elements))
      fail(path, "dimension " + std::to_string(d) + " of " + std::to_string(size) + " is too large");
    dims.push_back(size);
  }
  return dims;
}

// "the header declares 60000x28x28 pixels (47040000 bytes)"
std::string declared_text(const std::vector<std::uint32_t>& dims, std::uint64_t bytes, const std::string& what) {
  std::string shape;
  for (std::uint32_t d : dims) shape += (shape.empty() ? "" : "x") + std::to_string(d);
  return "the header declares " + shape + " " + what + " (" + bytes_text(bytes) + ")";
}

// Before anything is allocated: the declared size against the limit and against what the file
// can hold.
void check_declared_size(const ByteReader& in, const std::filesystem::path& path, const std::vector<std::uint32_t>& dims,
                         std::uint64_t declared, const std::string& what) {
  const std::string declares = declared_text(dims, declared, what);
  const std::string on_disk = bytes_text(in.file_bytes()) + (in.compressed() ? " gzip-compressed" : "");
  if (declared > kMaxIdxDataBytes)
    fail(path, declares + ", over the limit of 4 GiB for one IDX file; the file holds " + on_disk);
  if (in.compressed()) {
    if (declared > in.file_bytes() * kMaxDeflateRatio)
      fail(path, declares + ", more than " + on_disk + " can hold (deflate expands at most " +
                     std::to_string(kMaxDeflateRatio) + " times)");
    return;
  }
  const std::uint64_t holds = in.file_bytes() - std::min(in.file_bytes(), header_bytes(static_cast<int>(dims.size())));
  if (holds < declared)
    fail(path, "truncated: expected " + bytes_text(declared) + " of " + what + ", found " + std::to_string(holds) +
                   " (" + declares + ")");
  if (holds > declared)
    fail(path, "trailing data: expected " + bytes_text(declared) + " of " + what + ", found " + std::to_string(holds) +
                   " (" + declares + ")");
}

// How much room to take at once: all of it when the file's size is known to match (raw, or a gzip
// trailer agreeing), else a first chunk, grown as data arrives.
std::size_t first_capacity(const ByteReader& in, std::size_t expected) {
  constexpr std::size_t kFirstChunk = std::size_t{1} << 20;
  const bool size_known =
      !in.compressed() || in.gzip_size_hint() == static_cast<std::uint32_t>(expected & 0xFFFFFFFFu);
  return size_known ? expected : std::min(expected, kFirstChunk);
}

// Reads exactly `expected` bytes. The buffer grows only as data arrives, so a header that claims
// more than the file holds cannot make us allocate it.
std::vector<std::uint8_t> read_payload(ByteReader& in, const std::filesystem::path& path, std::size_t expected,
                                       const std::string& what) {
  std::vector<std::uint8_t> data;
  data.reserve(first_capacity(in, expected));
  while (data.size() < expected) {
    const std::size_t have = data.size();
    data.resize(std::min(expected, std::max(data.capacity(), 2 * have)));
    const std::size_t got = in.read(data.data() + have, data.size() - have);
    if (have + got < data.size())
      fail(path, "truncated: expected " + bytes_text(expected) + " of " + what + ", found " + std::to_string(have + got));
  }
  constexpr std::size_t kExtraCounted = std::size_t{1} << 20;
  if (const std::size_t extra = in.skip_to_end(kExtraCounted); extra > 0) {
    fail(path, "trailing data: expected " + bytes_text(expected) + " of " + what + ", found " +
                   (extra == kExtraCounted ? "over " : "") + std::to_string(expected + extra));
  }
  return data;
}

}  // namespace

IdxArray read_idx(const std::filesystem::path& path, int rank, const std::string& what) {
  ByteReader in(path);
  check_magic(in, path, rank);
  IdxArray array;
  std::uint64_t declared = 0;
  array.dims = read_dims(in, path, rank, declared);
  check_declared_size(in, path, array.dims, declared, what);
  try {
    array.data = read_payload(in, path, static_cast<std::size_t>(declared), what);
  } catch (const std::bad_alloc&) {
    fail(path, "out of memory: " + declared_text(array.dims, declared, what));
  }
  return array;
}

}  // namespace cnn::data
