#include "data/detail/jpeg_decoder.hpp"

#include <climits>
#include <string>

#include "data/data_error.hpp"

#ifdef CNN_HAVE_TURBOJPEG
#include <turbojpeg.h>
#endif

namespace cnn::data {

JpegScale choose_jpeg_scale(int width, int height, int min_width, int min_height) {
  JpegScale scale{1, width, height};
  for (int denominator : {2, 4, 8}) {
    // TJSCALED: ceil(side / denominator)
    const int w = (width + denominator - 1) / denominator, h = (height + denominator - 1) / denominator;
    if (w < min_width || h < min_height) break;
    scale = {denominator, w, h};
  }
  return scale;
}

#ifdef CNN_HAVE_TURBOJPEG

namespace {

// One decompressor a thread, made on first use and kept: a loader's threads decode every image
// through the same one. A failure leaves libjpeg-turbo 2.1's decompressor in a state that fails
// every later file (tjDecompressHeader3 does not reset it): after one, the next file gets a new
// decompressor.
class Decompressor {
 public:
  ~Decompressor() { drop(); }
  tjhandle get(const std::filesystem::path& path) {
    if (!handle_) handle_ = tjInitDecompress();
    if (!handle_) fail(path, std::string("cannot start the JPEG decoder: ") + tjGetErrorStr2(nullptr));
    return handle_;
  }
  // The failure's message, and the decompressor dropped.
  [[noreturn]] void fail_file(const std::filesystem::path& path, const std::string& what) {
    const std::string why = what + tjGetErrorStr2(handle_);
    drop();
    fail(path, why);
  }

 private:
  void drop() {
    if (handle_) tjDestroy(handle_);
    handle_ = nullptr;
  }
  tjhandle handle_ = nullptr;
};

Decompressor& decompressor() {
  thread_local Decompressor d;
  return d;
}

// The frame's kind, from the first start-of-frame marker: progressive (SOF2, SOF6, SOF10,
// SOF14) or not. The segments before it are walked by their lengths.
bool progressive(const unsigned char* bytes, std::size_t size) {
  std::size_t at = 2;  // after the start-of-image marker
  while (at + 4 <= size) {
    if (bytes[at] != 0xFF) return false;
    const unsigned char marker = bytes[at + 1];
    if (marker == 0xFF) {  // a fill byte
      ++at;
      continue;
    }
    const bool frame = marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
    if (frame) return marker == 0xC2 || marker == 0xC6 || marker == 0xCA || marker == 0xCE;
    at += 2 + (std::size_t{bytes[at + 2]} << 8 | bytes[at + 3]);
  }
  return false;
}

unsigned long checked_length(const std::filesystem::path& path, std::size_t size) {
  if (size > static_cast<std::size_t>(INT_MAX)) fail(path, "file too large for the JPEG decoder (over 2 GiB)");
  return static_cast<unsigned long>(size);
}

}  // namespace

bool turbojpeg_available() { return true; }

JpegHeader read_jpeg_header(const std::filesystem::path& path, const unsigned char* bytes, std::size_t size) {
  Decompressor& d = decompressor();
  tjhandle handle = d.get(path);
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(handle, bytes, checked_length(path, size), &width, &height, &subsampling, &colorspace) != 0)
    d.fail_file(path, "not a readable JPEG image: ");
  if (width <= 0 || height <= 0)
    fail(path, "the JPEG header gives a size of " + std::to_string(width) + "x" + std::to_string(height) +
                   ": an image needs at least one pixel");
  JpegHeader header;
  header.width = width;
  header.height = height;
  header.cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
  header.components = header.cmyk ? 4 : colorspace == TJCS_GRAY ? 1 : 3;
  header.progressive = progressive(bytes, size);
  return header;
}

void decode_jpeg(const std::filesystem::path& path, const unsigned char* bytes, std::size_t size, JpegScale scale,
                 int channels, std::uint8_t* out) {
  Decompressor& d = decompressor();
  tjhandle handle = d.get(path);
  const int format = channels == 1 ? TJPF_GRAY : TJPF_RGB;
  // A warning (stray bytes before a marker, a damaged stretch of data) is not a failure, as for
  // PIL and stb_image, which decode those files too; a file cut short never gets here
  // (check_jpeg_markers refuses it).
  const int flags = TJFLAG_LIMITSCANS;
  if (tjDecompress2(handle, bytes, checked_length(path, size), out, scale.width, 0, scale.height, format, flags) != 0 &&
      tjGetErrorCode(handle) != TJERR_WARNING)
    d.fail_file(path, "corrupt JPEG, decoding failed: ");
}

#else  // no libjpeg-turbo in this build

bool turbojpeg_available() { return false; }

JpegHeader read_jpeg_header(const std::filesystem::path& path, const unsigned char*, std::size_t) {
  fail(path, "this build decodes JPEG through stb_image (libjpeg-turbo was not found)");
}

void decode_jpeg(const std::filesystem::path& path, const unsigned char*, std::size_t, JpegScale, int, std::uint8_t*) {
  fail(path, "this build decodes JPEG through stb_image (libjpeg-turbo was not found)");
}

#endif

}  // namespace cnn::data
