#pragma once
// A JPEG's EXIF orientation (the APP1 "Exif" segment's tag 0x0112), and pixels turned to it, as
// PIL's ImageOps.exif_transpose turns them: a phone's photo stored sideways is trained on as it
// is shown.
#include <cstddef>
#include <cstdint>

namespace cnn::data {

// 1 (as stored) to 8; 1 where the file has no EXIF orientation or a malformed one (a bad EXIF
// segment never fails a photo that decodes).
int exif_orientation(const unsigned char* bytes, std::size_t size);

// Whether the orientation swaps height and width (5 to 8: a quarter turn, or a transposition).
inline bool swaps_sides(int orientation) { return orientation >= 5 && orientation <= 8; }

// src (height x width x channels, interleaved) turned to `orientation` into dst, which is width x
// height where swaps_sides, else height x width.
void apply_orientation(const std::uint8_t* src, int height, int width, int channels, int orientation,
                       std::uint8_t* dst);

}  // namespace cnn::data
