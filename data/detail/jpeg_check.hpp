#pragma once
// What stb_image (2.27, as Debian 12 ships it) trusts in a JPEG: a Huffman table (DHT segment)
// whose code counts add up to more than 256 overflows its tables (fixed upstream in 2.28), and a
// file cut short is read as zeros; and each scan of a progressive JPEG decodes the whole image
// again, so a small file of hundreds of scans takes minutes. This walks the markers the way
// stb_image meets them and refuses all three; it runs before any stb_image call on the bytes,
// stbi_info's included.
#include <cstddef>
#include <filesystem>

namespace cnn::data {

// Does nothing unless the bytes start as stb_image's JPEG reader sees a JPEG (0xFF fill bytes,
// then the start-of-image marker 0xD8), whatever the rest says: stbi_info tries JPEG first on
// every file. Throws DataError naming the file; other faults are left to stb_image, which
// refuses them.
void check_jpeg_markers(const std::filesystem::path& path, const unsigned char* bytes, std::size_t size);

}  // namespace cnn::data
