#include "data/detail/exif_orientation.hpp"

#include <cstring>

namespace cnn::data {
namespace {

constexpr std::uint16_t kOrientationTag = 0x0112;
constexpr std::uint16_t kShort = 3;

// The TIFF structure inside the EXIF segment: a byte order, then offsets from its start.
class Tiff {
 public:
  Tiff(const unsigned char* bytes, std::size_t size) : b_(bytes), size_(size) {}
  bool valid() const { return size_ >= 8 && (little() || (b_[0] == 'M' && b_[1] == 'M')) && u16(2) == 42; }
  bool little() const { return b_[0] == 'I' && b_[1] == 'I'; }
  std::uint16_t u16(std::size_t at) const {
    if (at + 2 > size_) return 0;
    return little() ? static_cast<std::uint16_t>(b_[at] | b_[at + 1] << 8)
                    : static_cast<std::uint16_t>(b_[at] << 8 | b_[at + 1]);
  }
  std::uint32_t u32(std::size_t at) const {
    if (at + 4 > size_) return 0;
    return little() ? std::uint32_t(b_[at]) | std::uint32_t(b_[at + 1]) << 8 | std::uint32_t(b_[at + 2]) << 16 |
                          std::uint32_t(b_[at + 3]) << 24
                    : std::uint32_t(b_[at]) << 24 | std::uint32_t(b_[at + 1]) << 16 | std::uint32_t(b_[at + 2]) << 8 |
                          std::uint32_t(b_[at + 3]);
  }
  std::size_t size() const { return size_; }

 private:
  const unsigned char* b_;
  std::size_t size_;
};

int orientation_in_tiff(const Tiff& tiff) {
  if (!tiff.valid()) return 1;
  const std::size_t ifd = tiff.u32(4);  // the first image file directory
  if (ifd + 2 > tiff.size()) return 1;
  const std::size_t entries = tiff.u16(ifd);
  for (std::size_t e = 0; e < entries; ++e) {
    const std::size_t at = ifd + 2 + 12 * e;  // tag, type, count, value
    if (at + 12 > tiff.size()) return 1;
    if (tiff.u16(at) != kOrientationTag) continue;
    const int value = tiff.u16(at + 8);
    return tiff.u16(at + 2) == kShort && value >= 1 && value <= 8 ? value : 1;
  }
  return 1;
}

}  // namespace

int exif_orientation(const unsigned char* bytes, std::size_t size) {
  if (size < 4 || bytes[0] != 0xFF || bytes[1] != 0xD8) return 1;
  std::size_t at = 2;
  // The segments before the first scan, each a marker and a 2-byte length that counts itself.
  while (at + 4 <= size && bytes[at] == 0xFF) {
    const unsigned char marker = bytes[at + 1];
    if (marker == 0xFF) {  // a fill byte
      ++at;
      continue;
    }
    if (marker == 0xDA || marker == 0xD9) return 1;  // the scan, or the end: no EXIF before it
    const std::size_t length = std::size_t{bytes[at + 2]} << 8 | bytes[at + 3];
    if (length < 2 || at + 2 + length > size) return 1;
    const unsigned char* data = bytes + at + 4;
    const std::size_t data_size = length - 2;
    if (marker == 0xE1 && data_size >= 6 && std::memcmp(data, "Exif\0\0", 6) == 0)
      return orientation_in_tiff(Tiff(data + 6, data_size - 6));
    at += 2 + length;
  }
  return 1;
}

void apply_orientation(const std::uint8_t* src, int height, int width, int channels, int orientation,
                       std::uint8_t* dst) {
  const bool swapped = swaps_sides(orientation);
  const int out_height = swapped ? width : height, out_width = swapped ? height : width;
  const auto c = static_cast<std::size_t>(channels);
  for (int y = 0; y < out_height; ++y)
    for (int x = 0; x < out_width; ++x) {
      // The source pixel shown at (y, x), as PIL's exif_transpose turns the image.
      int sy = y, sx = x;
      switch (orientation) {
        case 2: sx = width - 1 - x; break;                   // mirrored left-right
        case 3: sy = height - 1 - y, sx = width - 1 - x; break;  // half a turn
        case 4: sy = height - 1 - y; break;                  // mirrored top-bottom
        case 5: sy = x, sx = y; break;                       // transposed
        case 6: sy = height - 1 - x, sx = y; break;          // a quarter turn clockwise
        case 7: sy = height - 1 - x, sx = width - 1 - y; break;  // transversed
        case 8: sy = x, sx = width - 1 - y; break;           // a quarter turn counter-clockwise
        default: break;
      }
      const std::uint8_t* from = src + (static_cast<std::size_t>(sy) * static_cast<std::size_t>(width) +
                                        static_cast<std::size_t>(sx)) * c;
      std::uint8_t* to = dst + (static_cast<std::size_t>(y) * static_cast<std::size_t>(out_width) +
                                static_cast<std::size_t>(x)) * c;
      for (std::size_t k = 0; k < c; ++k) to[k] = from[k];
    }
}

}  // namespace cnn::data
