#include "data/detail/byte_reader.hpp"

#include <cstdint>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>
#include <vector>

#include "data/data_error.hpp"

namespace cnn::data {
namespace {

bool starts_with_gzip_magic(const unsigned char* b, std::size_t n) { return n >= 2 && b[0] == 0x1f && b[1] == 0x8b; }

std::string bytes_text(std::uint64_t n) { return std::to_string(n) + (n == 1 ? " byte" : " bytes"); }

}  // namespace

struct ByteReader::Gzip {
  z_stream stream{};
  std::vector<unsigned char> input = std::vector<unsigned char>(std::size_t{1} << 17);
  std::uint64_t read_from_file = 0;
  bool ended = false;  // the last member is done and the file ends after it

  Gzip() = default;
  Gzip(const Gzip&) = delete;
  Gzip& operator=(const Gzip&) = delete;
  ~Gzip() { inflateEnd(&stream); }
};

ByteReader::ByteReader(const std::filesystem::path& path) : path_(path) {
  require_regular_file(path);
  file_ = std::fopen(path.c_str(), "rb");
  if (!file_) fail(path, std::string("cannot open: ") + std::strerror(errno));
  std::error_code ec;
  file_bytes_ = std::filesystem::file_size(path, ec);
  if (ec) fail(path, "cannot read its size: " + ec.message());

  unsigned char magic[2] = {0, 0};
  const std::size_t got = std::fread(magic, 1, 2, file_);
  if (!starts_with_gzip_magic(magic, got)) {
    std::rewind(file_);
    return;
  }
  unsigned char trailer[4];
  if (file_bytes_ >= 8 && fseeko(file_, -4, SEEK_END) == 0 && std::fread(trailer, 1, 4, file_) == 4)
    gzip_size_hint_ = trailer[0] | (std::uint32_t{trailer[1]} << 8) | (std::uint32_t{trailer[2]} << 16) |
                      (std::uint32_t{trailer[3]} << 24);
  std::rewind(file_);

  gzip_ = std::make_unique<Gzip>();
  if (inflateInit2(&gzip_->stream, 15 + 16) != Z_OK) {  // 15: the largest window; +16: gzip only
    gzip_.reset();
    fail(path, "cannot start gzip decompression (out of memory)");
  }
}

ByteReader::~ByteReader() {
  gzip_.reset();
  if (file_) std::fclose(file_);
}

std::size_t ByteReader::read(void* out, std::size_t bytes) {
  auto* dst = static_cast<unsigned char*>(out);
  return gzip_ ? inflate_some(dst, bytes) : read_raw(dst, bytes);
}

std::size_t ByteReader::read_raw(unsigned char* out, std::size_t bytes) {
  const std::size_t got = std::fread(out, 1, bytes, file_);
  if (got < bytes && std::ferror(file_)) fail(path_, std::string("read error: ") + std::strerror(errno));
  return got;
}

std::size_t ByteReader::inflate_some(unsigned char* out, std::size_t bytes) {
  z_stream& z = gzip_->stream;
  std::size_t total = 0;
  while (total < bytes && !gzip_->ended) {
    if (z.avail_in == 0 && !refill()) fail(path_, "truncated gzip data: the file ends inside the compressed stream");
    const auto room = static_cast<uInt>(std::min<std::size_t>(bytes - total, std::size_t{1} << 30));
    z.next_out = out + total;
    z.avail_out = room;
    const int code = inflate(&z, Z_NO_FLUSH);
    total += room - z.avail_out;
    if (code == Z_STREAM_END) {
      start_next_member_or_end();
    } else if (code == Z_MEM_ERROR) {
      fail(path_, "out of memory while decompressing gzip data");
    } else if (code != Z_OK) {
      fail(path_, std::string("corrupt gzip data: ") + (z.msg ? z.msg : "zlib error " + std::to_string(code)));
    }
  }
  return total;
}

// Moves what input is left to the front of the buffer and fills the rest from the file; false
// when there is no input left at all.
bool ByteReader::refill() {
  z_stream& z = gzip_->stream;
  std::vector<unsigned char>& input = gzip_->input;
  if (z.avail_in > 0) std::memmove(input.data(), z.next_in, z.avail_in);
  const std::size_t got = std::fread(input.data() + z.avail_in, 1, input.size() - z.avail_in, file_);
  if (got == 0 && std::ferror(file_)) fail(path_, std::string("read error: ") + std::strerror(errno));
  gzip_->read_from_file += got;
  z.next_in = input.data();
  z.avail_in += static_cast<uInt>(got);
  return z.avail_in > 0;
}

void ByteReader::start_next_member_or_end() {
  z_stream& z = gzip_->stream;
  if (z.avail_in < 2) refill();
  if (z.avail_in == 0) {
    gzip_->ended = true;
  } else if (starts_with_gzip_magic(z.next_in, z.avail_in)) {
    inflateReset(&z);
  } else {
    const std::uint64_t at = gzip_->read_from_file - z.avail_in;
    fail(path_, bytes_text(file_bytes_ > at ? file_bytes_ - at : z.avail_in) +
                    " of trailing garbage after the gzip stream (from byte " + std::to_string(at) +
                    "): expected the end of the file or another gzip member");
  }
}

std::size_t ByteReader::skip_to_end(std::size_t at_most) {
  unsigned char buffer[1 << 14];
  std::size_t total = 0;
  while (total < at_most) {
    const std::size_t got = read(buffer, std::min(sizeof buffer, at_most - total));
    total += got;
    if (got == 0) break;
  }
  return total;
}

}  // namespace cnn::data
