#pragma once
// JPEG decoding through libjpeg-turbo's TurboJPEG API, where the build found it: the header, and
// the pixels at a DCT-domain scale (1/2, 1/4 or 1/8 of each side, decoded at that size, never at
// the full size first) as 8-bit grey or RGB. Every failure is a DataError naming the file; a
// warning is not (PIL decodes those files too).
#include <cstddef>
#include <cstdint>
#include <filesystem>

namespace cnn::data {

// Whether this build decodes JPEG through libjpeg-turbo (else stb_image decodes every format).
bool turbojpeg_available();

struct JpegHeader {
  int width = 0, height = 0;
  int components = 0;   // 1 grey, 3 colour, 4 CMYK or YCCK
  bool cmyk = false;    // CMYK or YCCK: TurboJPEG gives those only as CMYK, not as grey or RGB
  // Progressive: the decoder holds every DCT coefficient of the image (2 bytes each, a
  // component) whatever the scale it decodes at.
  bool progressive = false;
};

// The frame header. A DataError for what TurboJPEG cannot read (a 12-bit JPEG, an arithmetic-coded
// one where the library lacks it, a broken header).
JpegHeader read_jpeg_header(const std::filesystem::path& path, const unsigned char* bytes, std::size_t size);

// The size a JPEG of width x height decodes to at the smallest of 1, 1/2, 1/4 and 1/8 that keeps at
// least min_width x min_height (TurboJPEG rounds each scaled side up). denominator is 1, 2, 4 or 8.
struct JpegScale {
  int denominator = 1;
  int width = 0, height = 0;
};
JpegScale choose_jpeg_scale(int width, int height, int min_width, int min_height);

// Decodes at `scale` into out: scale.height rows of scale.width x channels bytes (1: grey, 3: RGB),
// interleaved. Not for CMYK (JpegHeader::cmyk). Progressive files of more than 500 scans are
// refused (TurboJPEG's limit, against files made to take minutes).
void decode_jpeg(const std::filesystem::path& path, const unsigned char* bytes, std::size_t size, JpegScale scale,
                 int channels, std::uint8_t* out);

}  // namespace cnn::data
