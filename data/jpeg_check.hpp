#pragma once
// What stb_image (2.27, as Debian 12 ships it) trusts in a JPEG: a Huffman table (DHT segment)
// whose code counts add up to more than 256 overflows its tables (fixed upstream in 2.28), and a
// file cut short is read as zeros. This walks the markers the way stb_image meets them and
// refuses both; it runs before any stb_image call on the bytes, stbi_info's included.
#include <cstddef>
#include <filesystem>

namespace cnn::data {

bool has_jpeg_signature(const unsigned char* bytes, std::size_t size);

// Throws DataError naming the file. Other faults are left to stb_image, which refuses them.
void check_jpeg_markers(const std::filesystem::path& path, const unsigned char* bytes, std::size_t size);

}  // namespace cnn::data
