#pragma once
// Image files to planar pixels at a chosen channel count and size: JPEG through libjpeg-turbo
// (data/detail/jpeg_decoder.hpp) where the build has it, at a reduced DCT scale where the output
// allows; PNG, BMP and the rest of JPEG through stb_image. Every failure is a DataError naming the
// file. A thread decodes through buffers it keeps (Note [Decoding without allocating]).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <vector>

#include <cnnengine/data/dataset.hpp>
#include "data/image_folder_dataset.hpp"  // kDefaultMaxDecodedImageBytes

namespace cnn::data {

// .png, .jpg, .jpeg, .bmp in any letter case.
bool has_image_extension(const std::filesystem::path& path);


struct ImageInfo {
  int width = 0, height = 0, channels = 0;
};

// Every function below refuses, with a DataError naming the file, an image whose decoded size
// is over max_decoded_bytes, before decoding it.

// Checks the header: a known format, at least one pixel, the size limit. (The file is read
// whole: stb_image's JPEG header parser must not see one the marker checks have not passed.)
ImageInfo probe_image(const std::filesystem::path& path, std::size_t max_decoded_bytes = kDefaultMaxDecodedImageBytes);

// Reads the file and checks all that can be checked without decoding the pixels: the header,
// that the file is complete, and for a PNG its chunk CRCs and compressed stream (adler-32).
ImageInfo verify_image(const std::filesystem::path& path, std::size_t max_decoded_bytes = kDefaultMaxDecodedImageBytes);

// Verifies (as verify_image) and decodes the whole file, converts it to target.channels (1 or
// 3) and resizes it (bilinear) to target.height x target.width, stretched whole or, with
// resize_shorter_side, framed as ImageFolderOptions::resize_shorter_side says (its shorter side
// resized, the centre cropped; check_framing holds); writes target.elements() bytes, CHW, into
// out. Returns the header (the size before resizing).
ImageInfo decode_image(const std::filesystem::path& path, SampleShape target, std::uint8_t* out,
                       std::size_t max_decoded_bytes = kDefaultMaxDecodedImageBytes, int resize_shorter_side = 0);

// Bytes of 0..255 to floats of [0, 1].
void to_float(const std::uint8_t* src, std::size_t n, float* out);

// The same, into floats of [0, 1].
ImageInfo decode_image(const std::filesystem::path& path, SampleShape target, float* out,
                       std::size_t max_decoded_bytes = kDefaultMaxDecodedImageBytes, int resize_shorter_side = 0);

// The window `choose` picks of the image as the file stores it, resized (bilinear) to target's
// height x width (mirrored left-right when `mirror`), as floats of [0, 1], CHW. A JPEG is decoded
// at the smallest DCT scale that keeps the window at least the target's size.
ImageInfo decode_window(const std::filesystem::path& path, SampleShape target, const WindowChooser& choose,
                        bool mirror, float* out, std::size_t max_decoded_bytes = kDefaultMaxDecodedImageBytes);

// The file decoded and resized (bilinear, stretched) to height x width, planar: an image as the
// decoded cache keeps it. A DataError where the file's size is no longer `stored` (it changed
// since the data set was opened).
void decode_kept(const std::filesystem::path& path, int channels, int height, int width, const ImageInfo& stored,
                 std::uint8_t* out, std::size_t max_decoded_bytes = kDefaultMaxDecodedImageBytes);

// A segmentation mask: an 8-bit greyscale PNG whose values are classes, decoded as they are (no
// conversion, no scaling). Anything else (another format, colour, a palette, alpha, another bit
// depth) is a DataError naming the file and what it is, as is a corrupt file.
struct Mask {
  ImageInfo info;                     // channels 1
  std::vector<std::uint8_t> values;  // info.height x info.width, row by row
};
Mask decode_mask(const std::filesystem::path& path, std::size_t max_decoded_bytes = kDefaultMaxDecodedImageBytes);

}  // namespace cnn::data
