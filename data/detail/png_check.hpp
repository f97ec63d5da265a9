#pragma once
// What stb_image does not check in a PNG: each chunk's CRC-32, and the zlib stream of the image
// data (its adler-32, and that it inflates to exactly what the header's size calls for). Without
// this a corrupt file decodes to wrong pixels, and a small one can inflate without bound.
#include <cstddef>
#include <filesystem>

namespace cnn::data {

bool has_png_signature(const unsigned char* bytes, std::size_t size);

// Throws DataError naming the file ("corrupt image: ..."). Reads the image data through zlib
// into a scratch buffer, so memory stays small whatever the image size.
void check_png_integrity(const std::filesystem::path& path, const unsigned char* bytes, std::size_t size);

}  // namespace cnn::data
