#include "data/detail/jpeg_check.hpp"

#include <cstdint>
#include <string>

#include "data/data_error.hpp"

namespace cnn::data {
namespace {

constexpr unsigned char kStartOfImage = 0xD8, kEndOfImage = 0xD9, kStartOfScan = 0xDA, kHuffmanTables = 0xC4;
constexpr std::uint32_t kMaxHuffmanCodes = 256;
// Each scan of a progressive JPEG decodes the whole image again: a 792 KB file of 694 nearly
// empty scans over 16384x16384 took stb_image 56 s. Encoders write about 10 (libjpeg's
// progressive script) to 20; a valid file can hold up to 694 per colour.
constexpr int kMaxScans = 64;

bool is_restart(unsigned char marker) { return marker >= 0xD0 && marker <= 0xD7; }
bool is_frame_header(unsigned char marker) { return marker >= 0xC0 && marker <= 0xC2; }  // those stb_image reads

// The segments stb_image reads (each a 2-byte length and its data); at any other marker it stops
// with an error.
bool is_segment_stb_reads(unsigned char marker) {
  return marker == kHuffmanTables || marker == 0xDB || marker == 0xDD || marker == 0xDC || marker == 0xFE ||
         marker == kStartOfScan || is_frame_header(marker) || (marker >= 0xE0 && marker <= 0xEF);
}

class MarkerWalk {
 public:
  MarkerWalk(const std::filesystem::path& path, const unsigned char* bytes, std::size_t size)
      : path_(path), bytes_(bytes), size_(size) {}

  void run() {
    std::size_t at = 0;
    if (size_ == 0 || bytes_[0] != 0xFF) return;
    while (at < size_ && bytes_[at] == 0xFF) ++at;
    if (at >= size_ || bytes_[at++] != kStartOfImage) return;
    bool before_frame = true;
    for (;;) {
      // Before the frame header stb_image skips stray bytes between segments; after it, a
      // marker must follow each segment or stb_image stops.
      if (before_frame)
        while (at < size_ && bytes_[at] != 0xFF) ++at;
      if (at < size_ && bytes_[at] != 0xFF) return;
      while (at < size_ && bytes_[at] == 0xFF) ++at;  // fill bytes
      if (at >= size_) truncated();
      const unsigned char marker = bytes_[at++];
      if (marker == kEndOfImage) return;
      if (!is_segment_stb_reads(marker)) return;
      if (is_frame_header(marker)) before_frame = false;
      if (marker == kHuffmanTables) check_huffman_tables(at);
      at = segment_end(at);
      if (marker == kStartOfScan) {
        if (++scans_ > kMaxScans)
          fail(path_, "too many JPEG scans: more than " + std::to_string(kMaxScans) +
                          " (each decodes the whole image again; encoders write about 10 to 20)");
        at = entropy_coded_data_end(at);
      }
    }
  }

 private:
  [[noreturn]] void truncated() const {
    fail(path_, "truncated JPEG: the file ends at byte " + std::to_string(size_) + " before its end-of-image marker");
  }

  unsigned byte(std::size_t at) const { return at < size_ ? bytes_[at] : 0; }  // stb_image reads zeros past the end

  std::size_t segment_end(std::size_t at) const {
    if (size_ - at < 2) truncated();
    const std::size_t end = at + (byte(at) << 8 | byte(at + 1));
    if (end > size_) truncated();
    return end;
  }

  // The scan's compressed data runs to the first marker that is not a restart (RSTn); a 0xFF
  // data byte is written 0xFF 0x00.
  std::size_t entropy_coded_data_end(std::size_t at) const {
    for (; at < size_; ++at) {
      if (bytes_[at] != 0xFF) continue;
      std::size_t next = at + 1;
      while (next < size_ && bytes_[next] == 0xFF) ++next;
      if (next >= size_) break;
      if (bytes_[next] != 0x00 && !is_restart(bytes_[next])) return at;
      at = next;
    }
    truncated();
  }

  // As stb_image reads a DHT segment: tables of a class-and-id byte, 16 code counts, the codes.
  void check_huffman_tables(std::size_t at) const {
    long left = static_cast<long>(byte(at) << 8 | byte(at + 1)) - 2;
    std::size_t table = at + 2;
    while (left > 0) {
      const unsigned id = byte(table);
      if ((id >> 4) > 1 || (id & 15) > 3) return;  // stb_image refuses it
      std::uint32_t codes = 0;
      for (std::size_t i = 1; i <= 16; ++i) codes += byte(table + i);
      if (codes > kMaxHuffmanCodes)
        fail(path_, "corrupt image: a JPEG Huffman table (the DHT segment at byte " + std::to_string(at - 2) +
                        ") has " + std::to_string(codes) + " codes, at most " + std::to_string(kMaxHuffmanCodes));
      table += 17 + codes;
      left -= static_cast<long>(17 + codes);
    }
  }

  const std::filesystem::path& path_;
  const unsigned char* bytes_;
  std::size_t size_;
  int scans_ = 0;
};

}  // namespace

void check_jpeg_markers(const std::filesystem::path& path, const unsigned char* bytes, std::size_t size) {
  MarkerWalk(path, bytes, size).run();
}

}  // namespace cnn::data
