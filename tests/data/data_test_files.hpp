#pragma once
// Helpers for the data tests: a temporary folder removed at the end of the test, and writers
// for the small IDX and image files the tests feed the readers.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace cnn::data::test {

class TempFolder {
 public:
  TempFolder();
  ~TempFolder();
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

void write_bytes(const std::filesystem::path& path, const std::vector<std::uint8_t>& bytes);
// CRC-32 (zlib's, and the checkpoint's): the test program does not link zlib.
std::uint32_t crc32(const std::vector<std::uint8_t>& bytes);
std::vector<std::uint8_t> gzip_bytes(const std::vector<std::uint8_t>& bytes);
void write_gzip(const std::filesystem::path& path, const std::vector<std::uint8_t>& bytes);
// A gzip member of `prefix` then `zeros` zero bytes, compressed about 160:1 (fixed Huffman
// codes; gzip -9 reaches 1000:1): for files that inflate to far more than they take on disk.
std::vector<std::uint8_t> gzip_with_zeros(const std::vector<std::uint8_t>& prefix, std::size_t zeros);
std::vector<std::uint8_t> read_bytes(const std::filesystem::path& path);
// The process's peak resident memory so far, in MiB (getrusage).
long peak_rss_mib();

// A PNG chunk: length, type, data and CRC.
std::vector<std::uint8_t> png_chunk(const std::string& type, const std::vector<std::uint8_t>& data);
// A grey PNG of `depth` bits a pixel (1, 2, 4 or 8; values below 2^depth, row by row),
// interlaced (Adam7) or not, its image data in stored deflate blocks. cgbi: Apple's variant, a
// CgBI chunk first and raw deflate without the zlib wrapper.
std::vector<std::uint8_t> grey_png(int width, int height, int depth, bool interlaced,
                                   const std::vector<std::uint8_t>& values, bool cgbi = false);
// A valid 8-bit grey PNG of zeros, compressed as gzip_with_zeros is: 30000x30000 takes 5.7 MB.
std::vector<std::uint8_t> zero_png(std::uint32_t width, std::uint32_t height);

// An IDX file's bytes: big-endian magic 0x000008<rank>, the dimensions, then `data`.
std::vector<std::uint8_t> idx_bytes(const std::vector<std::uint32_t>& dims, const std::vector<std::uint8_t>& data);

// n images of h x w whose pixel (i, y, x) is (i + y * w + x) % 256, and labels i % classes.
std::vector<std::uint8_t> idx_images(std::uint32_t n, std::uint32_t h, std::uint32_t w);
std::vector<std::uint8_t> idx_labels(std::uint32_t n, int classes);

// Writes an image with stb_image_write; pixels are HWC with `channels` (1 or 3). The format
// follows the extension: .png, .bmp or .jpg.
void write_image(const std::filesystem::path& path, int width, int height, int channels,
                 const std::vector<std::uint8_t>& pixels);

// A flat image of one value per channel.
std::vector<std::uint8_t> flat_pixels(int width, int height, const std::vector<std::uint8_t>& value);

}  // namespace cnn::data::test
