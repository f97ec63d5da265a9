#include "data/detail/png_check.hpp"

#define ZLIB_CONST
#include <zlib.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "data/data_error.hpp"
#include "data/detail/byte_reader.hpp"

namespace cnn::data {
namespace {

constexpr unsigned char kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
constexpr std::uint32_t kMaxChunkLength = 0x7FFFFFFF;  // the PNG specification's limit

[[noreturn]] void corrupt(const std::filesystem::path& path, const std::string& what) {
  fail(path, "corrupt image: " + what);
}

std::string hex32(std::uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08X", value);
  return text;
}

struct Chunk {
  std::string type;  // four letters in a valid file; printable in messages either way
  const unsigned char* data;
  std::uint32_t length;
};

std::string printable_type(const unsigned char* b) {
  std::string type;
  for (int i = 0; i < 4; ++i)
    type += std::isalpha(b[i]) ? std::string(1, static_cast<char>(b[i])) : "\\x" + hex32(b[i]).substr(8);
  return type;
}

// The chunk at `at`, its CRC checked; moves `at` past it.
Chunk next_chunk(const std::filesystem::path& path, const unsigned char* bytes, std::size_t size, std::size_t& at) {
  if (size - at < 12) corrupt(path, "truncated PNG: the file ends at byte " + std::to_string(size) + " without an IEND chunk");
  Chunk chunk{printable_type(bytes + at + 4), bytes + at + 8, big_endian_u32(bytes + at)};
  const std::string where = "the " + chunk.type + " chunk at byte " + std::to_string(at);
  if (chunk.length > kMaxChunkLength)
    corrupt(path, where + " declares " + std::to_string(chunk.length) + " bytes, over the PNG limit of 2^31-1");
  if (size - at - 12 < chunk.length)
    corrupt(path, "truncated PNG: " + where + " needs " + std::to_string(chunk.length + 12) + " bytes, the file ends after " +
                      std::to_string(size - at));
  const std::uint32_t stored = big_endian_u32(chunk.data + chunk.length);
  const auto computed = static_cast<std::uint32_t>(crc32(crc32(0, nullptr, 0), bytes + at + 4, chunk.length + 4));
  if (stored != computed)
    corrupt(path, "CRC mismatch in " + where + " (stored " + hex32(stored) + ", computed " + hex32(computed) + ")");
  at += 12 + std::size_t{chunk.length};
  return chunk;
}

// What the image data must inflate to, from the header: every row of every pass (one, or
// Adam7's seven) is a filter byte and its packed pixels.
std::uint64_t filtered_size(const std::filesystem::path& path, const Chunk& header) {
  if (header.length != 13) corrupt(path, "the IHDR chunk holds " + std::to_string(header.length) + " bytes, expected 13");
  const std::uint64_t width = big_endian_u32(header.data), height = big_endian_u32(header.data + 4);
  const unsigned depth = header.data[8], colour = header.data[9], interlace = header.data[12];
  const int channels[7] = {1, 0, 3, 1, 2, 0, 4};  // by colour type: grey, -, RGB, palette, grey+alpha, -, RGBA
  if (colour > 6 || channels[colour] == 0) corrupt(path, "unknown PNG colour type " + std::to_string(colour));
  const std::uint64_t bits = depth * static_cast<unsigned>(channels[colour]);
  auto pass_bytes = [&](std::uint64_t columns, std::uint64_t rows) {
    return columns == 0 || rows == 0 ? 0 : rows * (1 + (columns * bits + 7) / 8);
  };
  if (interlace == 0) return pass_bytes(width, height);
  constexpr int kAdam7[7][4] = {{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4},
                                {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}};  // first x, first y, step x, step y
  auto count = [](std::uint64_t size, int first, int step) {
    return size > static_cast<std::uint64_t>(first) ? (size - first + step - 1) / step : 0;
  };
  std::uint64_t total = 0;
  for (const auto& pass : kAdam7) total += pass_bytes(count(width, pass[0], pass[2]), count(height, pass[1], pass[3]));
  return total;
}

// Inflates the IDAT chunks' data, in order, into a scratch buffer: zlib checks the stream and
// its adler-32; the output must be exactly what the header calls for.
class ImageDataCheck {
 public:
  // raw_deflate: Apple's CgBI PNGs carry deflate without the zlib wrapper (stb_image reads them).
  ImageDataCheck(const std::filesystem::path& path, std::uint64_t expected, bool raw_deflate)
      : path_(path), expected_(expected) {
    if (inflateInit2(&stream_, raw_deflate ? -15 : 15) != Z_OK) fail(path, "out of memory checking the image data");
  }
  ~ImageDataCheck() { inflateEnd(&stream_); }
  ImageDataCheck(const ImageDataCheck&) = delete;
  ImageDataCheck& operator=(const ImageDataCheck&) = delete;

  void feed(const Chunk& chunk) {
    stream_.next_in = chunk.data;
    stream_.avail_in = chunk.length;
    while (!ended_) {
      unsigned char scratch[1 << 14];
      stream_.next_out = scratch;
      stream_.avail_out = sizeof scratch;
      const int code = inflate(&stream_, Z_NO_FLUSH);
      inflated_ += sizeof scratch - stream_.avail_out;
      if (inflated_ > expected_)
        corrupt(path_, "the image data inflates to more than the " + std::to_string(expected_) + " bytes its header calls for");
      if (code == Z_STREAM_END) {
        ended_ = true;  // stb_image ignores what follows, and so do we
      } else if (code == Z_BUF_ERROR || (code == Z_OK && stream_.avail_in == 0 && stream_.avail_out > 0)) {
        return;  // needs the next IDAT chunk
      } else if (code != Z_OK) {
        corrupt(path_, std::string("bad compressed image data (zlib: ") +
                           (stream_.msg ? stream_.msg : "error " + std::to_string(code)) + ")");
      }
    }
  }

  void finish() const {
    if (!ended_) corrupt(path_, "the compressed image data ends early (no IDAT chunk holds its end)");
    if (inflated_ < expected_)
      corrupt(path_, "the image data inflates to " + std::to_string(inflated_) + " bytes, its header calls for " +
                         std::to_string(expected_));
  }

 private:
  std::filesystem::path path_;
  z_stream stream_{};
  std::uint64_t expected_, inflated_ = 0;
  bool ended_ = false;
};

}  // namespace

bool has_png_signature(const unsigned char* bytes, std::size_t size) {
  return size >= sizeof kSignature && std::memcmp(bytes, kSignature, sizeof kSignature) == 0;
}

void check_png_integrity(const std::filesystem::path& path, const unsigned char* bytes, std::size_t size) {
  std::size_t at = sizeof kSignature;
  bool raw_deflate = false;
  std::optional<ImageDataCheck> image_data;
  for (;;) {
    const Chunk chunk = next_chunk(path, bytes, size, at);
    if (chunk.type == "IEND") break;
    if (chunk.type == "CgBI") {
      raw_deflate = true;
    } else if (chunk.type == "IHDR") {
      if (image_data) corrupt(path, "a second IHDR chunk");
      image_data.emplace(path, filtered_size(path, chunk), raw_deflate);
    } else if (chunk.type == "IDAT") {
      if (!image_data) corrupt(path, "image data (IDAT) before the header (IHDR)");
      image_data->feed(chunk);
    }
  }
  if (!image_data) corrupt(path, "no IHDR chunk");
  image_data->finish();
}

}  // namespace cnn::data
