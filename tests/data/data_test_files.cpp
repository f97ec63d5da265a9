#include "data_test_files.hpp"

#include <cstdint>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <iterator>
#include <random>
#include <stdexcept>

#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STB_IMAGE_WRITE_STATIC
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include <stb/stb_image_write.h>
#pragma GCC diagnostic pop

namespace cnn::data::test {
namespace fs = std::filesystem;

TempFolder::TempFolder() {
  static std::atomic<int> counter{0};
  std::random_device entropy;
  path_ = fs::temp_directory_path() /
          ("cnn_data_test_" + std::to_string(entropy()) + "_" + std::to_string(counter++));
  fs::create_directories(path_);
}

TempFolder::~TempFolder() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

void write_bytes(const fs::path& path, const std::vector<std::uint8_t>& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

namespace {

struct CrcTable {
  std::uint32_t entry[256];
  CrcTable() {
    for (std::uint32_t n = 0; n < 256; ++n) {
      std::uint32_t c = n;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
      entry[n] = c;
    }
  }
};

// Continues a CRC-32 over `count` copies of `byte` (crc is the running value before the final
// inversion).
std::uint32_t crc32_update(std::uint32_t crc, std::uint8_t byte, std::size_t count = 1) {
  static const CrcTable table;
  for (std::size_t i = 0; i < count; ++i) crc = table.entry[(crc ^ byte) & 0xFFu] ^ (crc >> 8);
  return crc;
}

}  // namespace

std::uint32_t crc32(const std::vector<std::uint8_t>& bytes) {
  std::uint32_t crc = 0xFFFFFFFFu;
  for (std::uint8_t b : bytes) crc = crc32_update(crc, b);
  return ~crc;
}

namespace {

void put_le(std::vector<std::uint8_t>& out, std::uint32_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
}

std::vector<std::uint8_t> stored_deflate(const std::vector<std::uint8_t>& bytes) {
  std::vector<std::uint8_t> out;
  std::size_t at = 0;
  do {
    const std::size_t length = std::min<std::size_t>(65535, bytes.size() - at);
    out.push_back(at + length == bytes.size() ? 1 : 0);
    put_le(out, static_cast<std::uint32_t>(length), 2);
    put_le(out, static_cast<std::uint32_t>(~length & 0xFFFF), 2);
    out.insert(out.end(), bytes.begin() + static_cast<std::ptrdiff_t>(at),
               bytes.begin() + static_cast<std::ptrdiff_t>(at + length));
    at += length;
  } while (at < bytes.size());
  return out;
}

}  // namespace

// The test program does not link zlib, so this writes a valid gzip member of stored (not
// compressed) deflate blocks by hand.
std::vector<std::uint8_t> gzip_bytes(const std::vector<std::uint8_t>& bytes) {
  std::vector<std::uint8_t> out = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255};
  const std::vector<std::uint8_t> blocks = stored_deflate(bytes);
  out.insert(out.end(), blocks.begin(), blocks.end());
  put_le(out, crc32(bytes), 4);
  put_le(out, static_cast<std::uint32_t>(bytes.size()), 4);
  return out;
}

namespace {

// Deflate's bit order: values least significant bit first, Huffman codes most significant first.
class BitWriter {
 public:
  explicit BitWriter(std::vector<std::uint8_t>& out) : out_(out) {}
  void value(std::uint32_t bits, int count) {
    for (int i = 0; i < count; ++i) bit((bits >> i) & 1u);
  }
  void code(std::uint32_t bits, int count) {
    for (int i = count - 1; i >= 0; --i) bit((bits >> i) & 1u);
  }
  void flush() {
    if (used_) out_.push_back(current_);
    current_ = 0;
    used_ = 0;
  }

 private:
  void bit(std::uint32_t b) {
    current_ = static_cast<std::uint8_t>(current_ | (b << used_));
    if (++used_ == 8) flush();
  }
  std::vector<std::uint8_t>& out_;
  std::uint8_t current_ = 0;
  int used_ = 0;
};

// The fixed-Huffman code (RFC 1951, 3.2.6) of a literal byte.
void literal(BitWriter& bits, std::uint8_t byte) {
  if (byte < 144) bits.code(0x30u + byte, 8);
  else bits.code(0x190u + (byte - 144u), 9);
}

// Appends one fixed-Huffman deflate block of `prefix` as literals, then `zeros` zero bytes as
// matches of 258 bytes at distance 1.
void deflate_with_zeros(std::vector<std::uint8_t>& out, const std::vector<std::uint8_t>& prefix, std::size_t zeros) {
  BitWriter bits(out);
  bits.value(1, 1);  // the last block
  bits.value(1, 2);  // fixed Huffman codes
  for (std::uint8_t b : prefix) literal(bits, b);
  std::size_t left = zeros;
  if (left > 0) {
    literal(bits, 0);
    --left;
  }
  for (; left >= 258; left -= 258) {  // length code 285 (258), distance code 0 (1)
    bits.code(0xC5, 8);
    bits.code(0, 5);
  }
  for (; left > 0; --left) literal(bits, 0);
  bits.code(0, 7);  // end of block
  bits.flush();
}

void put_be(std::vector<std::uint8_t>& out, std::uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(value >> shift));
}

}  // namespace

std::vector<std::uint8_t> gzip_with_zeros(const std::vector<std::uint8_t>& prefix, std::size_t zeros) {
  std::vector<std::uint8_t> out = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255};
  deflate_with_zeros(out, prefix, zeros);
  std::uint32_t crc = 0xFFFFFFFFu;
  for (std::uint8_t b : prefix) crc = crc32_update(crc, b);
  put_le(out, ~crc32_update(crc, 0, zeros), 4);
  put_le(out, static_cast<std::uint32_t>(prefix.size() + zeros), 4);
  return out;
}

std::vector<std::uint8_t> png_chunk(const std::string& type, const std::vector<std::uint8_t>& data) {
  std::vector<std::uint8_t> typed(type.begin(), type.end());
  typed.insert(typed.end(), data.begin(), data.end());
  std::vector<std::uint8_t> chunk;
  chunk.reserve(typed.size() + 8);
  put_be(chunk, static_cast<std::uint32_t>(data.size()));
  chunk.insert(chunk.end(), typed.begin(), typed.end());
  put_be(chunk, crc32(typed));
  return chunk;
}

namespace {

std::uint32_t adler32(const std::vector<std::uint8_t>& bytes) {
  std::uint32_t a = 1, b = 0;
  for (std::uint8_t byte : bytes) {
    a = (a + byte) % 65521;
    b = (b + a) % 65521;
  }
  return b << 16 | a;
}

// The rows of the pixels at (first_x + i * step_x, first_y + j * step_y), each a filter byte (0)
// and the values packed most significant bits first.
void append_rows(std::vector<std::uint8_t>& out, int width, int height, int depth, const std::vector<std::uint8_t>& values,
                 int first_x, int first_y, int step_x, int step_y) {
  for (int y = first_y; y < height; y += step_y) {
    if (first_x >= width) return;  // an empty pass has no rows at all
    out.push_back(0);
    int bits = 0;
    std::uint8_t current = 0;
    for (int x = first_x; x < width; x += step_x) {
      current = static_cast<std::uint8_t>(current << depth | values[static_cast<std::size_t>(y * width + x)]);
      bits += depth;
      if (bits == 8) {
        out.push_back(current);
        bits = 0;
        current = 0;
      }
    }
    if (bits) out.push_back(static_cast<std::uint8_t>(current << (8 - bits)));
  }
}

}  // namespace

std::vector<std::uint8_t> grey_png(int width, int height, int depth, bool interlaced,
                                   const std::vector<std::uint8_t>& values, bool cgbi) {
  std::vector<std::uint8_t> raw;
  if (interlaced) {
    constexpr int kAdam7[7][4] = {{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4},
                                  {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}};
    for (const auto& pass : kAdam7) append_rows(raw, width, height, depth, values, pass[0], pass[1], pass[2], pass[3]);
  } else {
    append_rows(raw, width, height, depth, values, 0, 0, 1, 1);
  }
  std::vector<std::uint8_t> image = cgbi ? std::vector<std::uint8_t>{} : std::vector<std::uint8_t>{0x78, 0x01};
  const std::vector<std::uint8_t> blocks = stored_deflate(raw);
  image.insert(image.end(), blocks.begin(), blocks.end());
  if (!cgbi) put_be(image, adler32(raw));
  std::vector<std::uint8_t> header;
  put_be(header, static_cast<std::uint32_t>(width));
  put_be(header, static_cast<std::uint32_t>(height));
  header.insert(header.end(), {static_cast<std::uint8_t>(depth), 0, 0, 0, static_cast<std::uint8_t>(interlaced)});
  std::vector<std::uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  std::vector<std::vector<std::uint8_t>> chunks;
  if (cgbi) chunks.push_back(png_chunk("CgBI", {0x50, 0x00, 0x20, 0x06}));
  for (const auto& chunk : {png_chunk("IHDR", header), png_chunk("IDAT", image), png_chunk("IEND", {})}) chunks.push_back(chunk);
  for (const auto& chunk : chunks) png.insert(png.end(), chunk.begin(), chunk.end());
  return png;
}

std::vector<std::uint8_t> zero_png(std::uint32_t width, std::uint32_t height) {
  std::vector<std::uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  std::vector<std::uint8_t> header;
  put_be(header, width);
  put_be(header, height);
  header.insert(header.end(), {8, 0, 0, 0, 0});  // 8-bit grey, deflate, adaptive filters, no interlace
  std::vector<std::uint8_t> image = {0x78, 0x01};  // zlib: deflate, 32 KiB window
  const std::size_t zeros = std::size_t{height} * (std::size_t{width} + 1);  // a filter byte (0) a row
  deflate_with_zeros(image, {}, zeros);
  put_be(image, static_cast<std::uint32_t>((zeros % 65521) << 16 | 1));  // adler-32 of zeros
  for (const auto& chunk : {png_chunk("IHDR", header), png_chunk("IDAT", image), png_chunk("IEND", {})})
    png.insert(png.end(), chunk.begin(), chunk.end());
  return png;
}

void write_gzip(const fs::path& path, const std::vector<std::uint8_t>& bytes) {
  write_bytes(path, gzip_bytes(bytes));
}

long peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024;
}

std::vector<std::uint8_t> read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<std::uint8_t> idx_bytes(const std::vector<std::uint32_t>& dims, const std::vector<std::uint8_t>& data) {
  std::vector<std::uint8_t> bytes = {0, 0, 0x08, static_cast<std::uint8_t>(dims.size())};
  for (std::uint32_t d : dims)
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<std::uint8_t>(d >> shift));
  bytes.insert(bytes.end(), data.begin(), data.end());
  return bytes;
}

std::vector<std::uint8_t> idx_images(std::uint32_t n, std::uint32_t h, std::uint32_t w) {
  std::vector<std::uint8_t> pixels;
  for (std::uint32_t i = 0; i < n; ++i)
    for (std::uint32_t p = 0; p < h * w; ++p) pixels.push_back(static_cast<std::uint8_t>((i + p) % 256));
  return idx_bytes({n, h, w}, pixels);
}

std::vector<std::uint8_t> idx_labels(std::uint32_t n, int classes) {
  std::vector<std::uint8_t> labels;
  for (std::uint32_t i = 0; i < n; ++i) labels.push_back(static_cast<std::uint8_t>(i % static_cast<std::uint32_t>(classes)));
  return idx_bytes({n}, labels);
}

void write_image(const fs::path& path, int width, int height, int channels, const std::vector<std::uint8_t>& pixels) {
  fs::create_directories(path.parent_path());
  const std::string ext = path.extension().string();
  int ok = 0;
  if (ext == ".png") ok = stbi_write_png(path.c_str(), width, height, channels, pixels.data(), width * channels);
  else if (ext == ".bmp") ok = stbi_write_bmp(path.c_str(), width, height, channels, pixels.data());
  else if (ext == ".jpg") ok = stbi_write_jpg(path.c_str(), width, height, channels, pixels.data(), 95);
  if (!ok) throw std::runtime_error("cannot write image " + path.string());
}

std::vector<std::uint8_t> flat_pixels(int width, int height, const std::vector<std::uint8_t>& value) {
  std::vector<std::uint8_t> pixels;
  for (int i = 0; i < width * height; ++i) pixels.insert(pixels.end(), value.begin(), value.end());
  return pixels;
}

}  // namespace cnn::data::test
