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
// through the same one.
class Decompressor {
 public:
  Decompressor() : handle_(tjInitDecompress()) {}
  ~Decompressor() {
    if (handle_) tjDestroy(handle_);
  }
  Decompressor(const Decompressor&) = delete;
  Decompressor& operator=(const Decompressor&) = delete;
  tjhandle get(const std::filesystem::path& path) const {
    if (!handle_) fail(path, std::string("cannot start the JPEG decoder: ") + tjGetErrorStr2(nullptr));
    return handle_;
  }

 private:
  tjhandle handle_;
};

tjhandle decompressor(const std::filesystem::path& path) {
  thread_local Decompressor d;
  return d.get(path);
}

unsigned long checked_length(const std::filesystem::path& path, std::size_t size) {
  if (size > static_cast<std::size_t>(INT_MAX)) fail(path, "file too large for the JPEG decoder (over 2 GiB)");
  return static_cast<unsigned long>(size);
}

}  // namespace

bool turbojpeg_available() { return true; }

JpegHeader read_jpeg_header(const std::filesystem::path& path, const unsigned char* bytes, std::size_t size) {
  tjhandle handle = decompressor(path);
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(handle, bytes, checked_length(path, size), &width, &height, &subsampling, &colorspace) != 0)
    fail(path, std::string("not a readable JPEG image: ") + tjGetErrorStr2(handle));
  if (width <= 0 || height <= 0)
    fail(path, "the JPEG header gives a size of " + std::to_string(width) + "x" + std::to_string(height) +
                   ": an image needs at least one pixel");
  JpegHeader header;
  header.width = width;
  header.height = height;
  header.cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
  header.components = header.cmyk ? 4 : colorspace == TJCS_GRAY ? 1 : 3;
  return header;
}

void decode_jpeg(const std::filesystem::path& path, const unsigned char* bytes, std::size_t size, JpegScale scale,
                 int channels, std::uint8_t* out) {
  tjhandle handle = decompressor(path);
  const int format = channels == 1 ? TJPF_GRAY : TJPF_RGB;
  // A warning (data cut short, a corrupt stretch decoded as grey) fails the file: a run trains on
  // what the file holds or on nothing.
  const int flags = TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS;
  if (tjDecompress2(handle, bytes, checked_length(path, size), out, scale.width, 0, scale.height, format, flags) != 0)
    fail(path, std::string("corrupt JPEG, decoding failed: ") + tjGetErrorStr2(handle));
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
