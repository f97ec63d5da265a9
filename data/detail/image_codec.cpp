#include "data/detail/image_codec.hpp"

#include <algorithm>
#include <cstdint>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <system_error>
#include <vector>

#include "data/data_error.hpp"
#include "data/detail/byte_reader.hpp"
#include "data/detail/exif_orientation.hpp"
#include "data/detail/image_window.hpp"
#include "data/detail/jpeg_check.hpp"
#include "data/detail/jpeg_decoder.hpp"
#include "data/detail/open_file.hpp"
#include "data/detail/png_check.hpp"
#include "data/detail/resize.hpp"

// The one translation unit that compiles stb_image. Static, so that the library exports no stbi
// symbols that could clash with an application's own copy.
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
#define STBI_ONLY_BMP
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#include "stb_image.h"
#pragma GCC diagnostic pop

namespace cnn::data {
namespace {

// Reads the file into `bytes`, which keeps its room from call to call.
void read_file_into(const std::filesystem::path& path, std::vector<unsigned char>& bytes) {
  File file = open_for_reading(path);
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) fail(path, "cannot read its size: " + ec.message());
  if (size > static_cast<std::uintmax_t>(INT_MAX)) fail(path, "file too large for the image decoder (over 2 GiB)");
  try {
    bytes.resize(size);
  } catch (const std::bad_alloc&) {
    fail(path, "out of memory reading its " + std::to_string(size) + " bytes");
  }
  const std::size_t got = std::fread(bytes.data(), 1, bytes.size(), file.get());
  if (std::ferror(file.get())) fail(path, std::string("read error: ") + std::strerror(errno));
  bytes.resize(got);  // the file may have shrunk since; the checks below see what was read
}

std::vector<unsigned char> read_whole_file(const std::filesystem::path& path) {
  std::vector<unsigned char> bytes;
  read_file_into(path, bytes);
  return bytes;
}

std::string reason() {
  const char* text = stbi_failure_reason();
  return text ? text : "unknown reason";
}

std::uint32_t little_endian(const std::vector<unsigned char>& b, std::size_t at, int bytes) {
  std::uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | b[at + static_cast<std::size_t>(i)];
  return v;
}

// stb_image reads past the end of a truncated BMP as zeros and reports success: one without
// compression must hold every row its header promises.
void check_bmp_complete(const std::filesystem::path& path, const std::vector<unsigned char>& b) {
  if (b.size() < 34 || b[0] != 'B' || b[1] != 'M') return;
  const std::uint32_t compression = little_endian(b, 30, 4);
  if (compression != 0 && compression != 3) return;  // run-length encoded: stb checks those
  const std::uint64_t offset = little_endian(b, 10, 4), width = little_endian(b, 18, 4),
                      bits = little_endian(b, 28, 2);
  const auto height = static_cast<std::int32_t>(little_endian(b, 22, 4));
  const std::uint64_t rows = static_cast<std::uint64_t>(height < 0 ? -static_cast<std::int64_t>(height) : height);
  const std::uint64_t needed = offset + (bits * width + 31) / 32 * 4 * rows;
  if (b.size() < needed)
    fail(path, "truncated BMP: the header promises " + std::to_string(needed) + " bytes, the file has " +
                   std::to_string(b.size()));
}

// Why stbi_info refused the file. It tries PNG, then JPEG, then BMP, so its own reason is the
// last format's "unknown image type" whatever stopped the first: ask the format the file's
// signature names instead, and for a PNG say what size its header gives.
std::string unreadable_reason(const std::vector<unsigned char>& bytes) {
  const int length = static_cast<int>(bytes.size());
  stbi__context s;
  int width = 0, height = 0, channels = 0;
  stbi__start_mem(&s, bytes.data(), length);
  if (stbi__png_test(&s)) {
    stbi__start_mem(&s, bytes.data(), length);
    if (stbi__png_info(&s, &width, &height, &channels)) return "unknown reason";
    constexpr std::size_t kSizeEnd = 24;  // signature, IHDR length and tag, width, height
    if (bytes.size() >= kSizeEnd && std::memcmp(bytes.data() + 12, "IHDR", 4) == 0) {
      const std::uint32_t w = big_endian_u32(bytes.data() + 16), h = big_endian_u32(bytes.data() + 20);
      const std::string size = std::to_string(w) + "x" + std::to_string(h);
      if (w == 0 || h == 0) return "the PNG header gives a size of " + size + ": an image needs at least one pixel";
      if (reason() == std::string("too large"))
        return "the PNG header gives a size of " + size + ": too large to decode (at most " +
               std::to_string(STBI_MAX_DIMENSIONS) + " pixels a side and 1 GiB decoded)";
    }
    return "not a readable PNG image: " + reason();
  }
  stbi__start_mem(&s, bytes.data(), length);
  if (stbi__jpeg_test(&s)) {
    stbi__start_mem(&s, bytes.data(), length);
    stbi__jpeg_info(&s, &width, &height, &channels);
    return "not a readable JPEG image: " + reason();
  }
  stbi__start_mem(&s, bytes.data(), length);
  if (stbi__bmp_test(&s)) {
    stbi__start_mem(&s, bytes.data(), length);
    stbi__bmp_info(&s, &width, &height, &channels);
    return "not a readable BMP image: " + reason();
  }
  return "not a readable PNG, JPEG or BMP image: unknown signature";
}

}  // namespace

bool has_image_extension(const std::filesystem::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".bmp";
}

namespace {

void check_decoded_size(const std::filesystem::path& path, const ImageInfo& info, bool sixteen_bit,
                        std::size_t max_decoded_bytes) {
  const std::uint64_t bytes = std::uint64_t(info.width) * std::uint64_t(info.height) *
                              std::uint64_t(info.channels) * (sixteen_bit ? 2 : 1);
  if (bytes <= max_decoded_bytes) return;
  fail(path, "too large: " + std::to_string(info.width) + "x" + std::to_string(info.height) + " with " +
                 std::to_string(info.channels) + (info.channels == 1 ? " channel" : " channels") +
                 (sixteen_bit ? " of 16 bits" : "") + " decodes to " + std::to_string(bytes) +
                 " bytes, over the limit of " + std::to_string(max_decoded_bytes) +
                 " bytes for one image (max_decoded_image_bytes)");
}

// The header, read by stb_image once the checks it relies on have passed: a known format, at
// least one pixel (a BMP may declare none), a decoded size within the limit.
ImageInfo checked_header(const std::filesystem::path& path, const std::vector<unsigned char>& bytes,
                         std::size_t max_decoded_bytes) {
  check_jpeg_markers(path, bytes.data(), bytes.size());
  const int length = static_cast<int>(bytes.size());
  ImageInfo info;
  if (!stbi_info_from_memory(bytes.data(), length, &info.width, &info.height, &info.channels))
    fail(path, unreadable_reason(bytes));
  if (info.width <= 0 || info.height <= 0)
    fail(path, "the header gives a size of " + std::to_string(info.width) + "x" + std::to_string(info.height) +
                   ": an image needs at least one pixel");
  check_decoded_size(path, info, stbi_is_16_bit_from_memory(bytes.data(), length), max_decoded_bytes);
  // A JPEG's size as it is shown: a quarter turn of its EXIF orientation swaps the sides.
  if (swaps_sides(exif_orientation(bytes.data(), bytes.size()))) std::swap(info.width, info.height);
  return info;
}

// The file's bytes checked as far as they can be without decoding the pixels: the header, that a
// BMP holds all its rows, and for a PNG its chunk CRCs and compressed stream, which stb_image does
// not check.
ImageInfo check_image_bytes(const std::filesystem::path& path, const std::vector<unsigned char>& bytes,
                            std::size_t max_decoded_bytes) {
  const ImageInfo info = checked_header(path, bytes, max_decoded_bytes);
  check_bmp_complete(path, bytes);
  if (has_png_signature(bytes.data(), bytes.size())) check_png_integrity(path, bytes.data(), bytes.size());
  return info;
}

struct CheckedImage {
  std::vector<unsigned char> bytes;
  ImageInfo info;
};

CheckedImage read_checked_image(const std::filesystem::path& path, std::size_t max_decoded_bytes) {
  CheckedImage image{read_whole_file(path), {}};
  image.info = check_image_bytes(path, image.bytes, max_decoded_bytes);
  return image;
}

// Note [Decoding without allocating]
// A loader thread decodes every image of a run through the same buffers: the file's bytes, the
// decoded pixels (a JPEG at its reduced DCT scale), the resized sample. Each grows to the largest
// image met and stays, so that steady state allocates nothing of ours (libjpeg-turbo's own
// per-image pools and stb_image's buffers for the other formats aside); buffers over
// kRetainedScratchBytes are given back after the image, so that one huge file does not hold its
// memory for the rest of a run.
constexpr std::size_t kRetainedScratchBytes = std::size_t{64} << 20;

struct DecodeScratch {
  std::vector<unsigned char> file;
  std::vector<std::uint8_t> pixels;  // interleaved, as decoded
  std::vector<std::uint8_t> shown;   // the same turned to the JPEG's EXIF orientation
  std::vector<std::uint8_t> sample;  // planar, resized to the target
};

DecodeScratch& decode_scratch() {
  thread_local DecodeScratch scratch;
  return scratch;
}

void trim(std::vector<std::uint8_t>& buffer) {
  if (buffer.capacity() > kRetainedScratchBytes) std::vector<std::uint8_t>().swap(buffer);
}

class TrimOnExit {
 public:
  ~TrimOnExit() {
    DecodeScratch& s = decode_scratch();
    trim(s.file);
    trim(s.pixels);
    trim(s.shown);
    trim(s.sample);
  }
};

// Decoded pixels, interleaved: in the thread's scratch (JPEG through libjpeg-turbo) or in
// stb_image's own buffer.
struct Decoded {
  // The header: the size before any reduction, as shown (turned to a JPEG's EXIF orientation);
  // the channels as stored.
  ImageInfo stored;
  const std::uint8_t* pixels = nullptr;
  int height = 0, width = 0;  // as decoded
  int denominator = 1;         // decoded at 1/denominator of each side (TurboJPEG rounds the sides up)
  std::unique_ptr<stbi_uc, void (*)(void*)> owned{nullptr, stbi_image_free};
};

struct MinimumSize {
  std::int64_t height = 0, width = 0;
};

int as_int(std::int64_t v) { return static_cast<int>(std::clamp<std::int64_t>(v, 0, INT_MAX)); }

void check_coefficients(const std::filesystem::path& path, const JpegHeader& header, std::size_t max_decoded_bytes) {
  const std::uint64_t bytes =
      2 * std::uint64_t(header.width) * std::uint64_t(header.height) * std::uint64_t(header.components);
  if (bytes <= max_decoded_bytes) return;
  fail(path, "too large: a progressive JPEG of " + std::to_string(header.width) + "x" + std::to_string(header.height) +
                 " holds all its coefficients while it decodes, " + std::to_string(bytes) +
                 " bytes, over the limit of " + std::to_string(max_decoded_bytes) +
                 " bytes for one image (max_decoded_image_bytes)");
}

bool is_turbojpeg_file(const std::vector<unsigned char>& bytes) {
  // libjpeg reads a file that starts with the start-of-image marker at once; stb_image also takes
  // fill bytes before it, and keeps those files.
  return turbojpeg_available() && bytes.size() >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF;
}

// The file at `path` decoded to `channels` (1 or 3). minimum(stored) says how large the decoded
// image must stay for what the caller makes of it: a JPEG is decoded at the smallest DCT scale
// that keeps it (choose_jpeg_scale), the other formats whole.
template <typename Minimum>
Decoded decode_pixels(const std::filesystem::path& path, int channels, std::size_t max_decoded_bytes,
                      Minimum minimum) {
  DecodeScratch& scratch = decode_scratch();
  read_file_into(path, scratch.file);
  const std::vector<unsigned char>& bytes = scratch.file;
  const int orientation = exif_orientation(bytes.data(), bytes.size());
  const bool swapped = swaps_sides(orientation);
  Decoded d;
  // The pixels decoded as stored, turned as the JPEG's EXIF orientation says they are shown.
  auto show = [&](const std::uint8_t* pixels, int height, int width) {
    d.pixels = pixels;
    d.height = height;
    d.width = width;
    if (orientation == 1) return;
    scratch.shown.resize(static_cast<std::size_t>(height) * static_cast<std::size_t>(width) *
                         static_cast<std::size_t>(channels));
    apply_orientation(pixels, height, width, channels, orientation, scratch.shown.data());
    d.pixels = scratch.shown.data();
    if (swapped) std::swap(d.height, d.width);
  };
  if (is_turbojpeg_file(bytes)) {
    check_jpeg_markers(path, bytes.data(), bytes.size());
    const JpegHeader header = read_jpeg_header(path, bytes.data(), bytes.size());
    if (!header.cmyk) {  // TurboJPEG gives CMYK only as CMYK: stb_image converts it below
      d.stored = {swapped ? header.height : header.width, swapped ? header.width : header.height, header.components};
      // What decoding holds: the pixels at the channels asked for (grey converted to RGB takes 3),
      // and for a progressive file every coefficient, 2 bytes each, whatever the scale.
      check_decoded_size(path, {header.width, header.height, std::max(header.components, channels)}, false,
                         max_decoded_bytes);
      if (header.progressive) check_coefficients(path, header, max_decoded_bytes);
      MinimumSize least = minimum(d.stored);
      if (swapped) std::swap(least.height, least.width);  // in the stored image's sides
      const JpegScale scale = choose_jpeg_scale(header.width, header.height, as_int(least.width), as_int(least.height));
      scratch.pixels.resize(static_cast<std::size_t>(scale.width) * static_cast<std::size_t>(scale.height) *
                            static_cast<std::size_t>(channels));
      decode_jpeg(path, bytes.data(), bytes.size(), scale, channels, scratch.pixels.data());
      show(scratch.pixels.data(), scale.height, scale.width);
      d.denominator = scale.denominator;
      return d;
    }
  }
  d.stored = check_image_bytes(path, bytes, max_decoded_bytes);
  minimum(d.stored);
  int channels_in_file = 0, width = 0, height = 0;
  d.owned.reset(stbi_load_from_memory(bytes.data(), static_cast<int>(bytes.size()), &width, &height,
                                      &channels_in_file, channels));
  if (!d.owned) fail(path, "corrupt image, decoding failed: " + reason());
  const int header_width = swapped ? d.stored.height : d.stored.width;
  const int header_height = swapped ? d.stored.width : d.stored.height;
  if (width != header_width || height != header_height)
    fail(path, "corrupt image: decoded as " + std::to_string(width) + "x" + std::to_string(height) +
                   ", its header gives " + std::to_string(header_width) + "x" + std::to_string(header_height));
  show(d.owned.get(), height, width);
  return d;
}

void check_target_channels(const std::filesystem::path& path, int channels) {
  if (channels != 1 && channels != 3)
    fail(path, "cannot convert to " + std::to_string(channels) + " channels: expected 1 or 3");
}

}  // namespace

// The whole file is read: stb_image's JPEG header parser cannot be trusted with a file that
// check_jpeg_markers has not seen.
ImageInfo probe_image(const std::filesystem::path& path, std::size_t max_decoded_bytes) {
  return checked_header(path, read_whole_file(path), max_decoded_bytes);
}

ImageInfo verify_image(const std::filesystem::path& path, std::size_t max_decoded_bytes) {
  return read_checked_image(path, max_decoded_bytes).info;
}

void to_float(const std::uint8_t* src, std::size_t n, float* out) {
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(src[i]) * (1.0f / 255.0f);
}

namespace {

// decode_image without giving back the thread's buffers, for the callers that do it themselves.
ImageInfo decode_image_kept(const std::filesystem::path& path, SampleShape target, std::uint8_t* out,
                            std::size_t max_decoded_bytes, int resize_shorter_side) {
  check_target_channels(path, target.channels);
  const Decoded d = decode_pixels(path, target.channels, max_decoded_bytes, [&](const ImageInfo& stored) {
    const Framing f = frame_image(stored.height, stored.width, target.height, target.width, resize_shorter_side);
    return MinimumSize{f.scaled_height, f.scaled_width};
  });
  resize_bilinear_hwc_to_chw(d.pixels, d.height, d.width, target.channels, out, target.height, target.width,
                             frame_image(d.height, d.width, target.height, target.width, resize_shorter_side));
  return d.stored;
}

}  // namespace

ImageInfo decode_image(const std::filesystem::path& path, SampleShape target, std::uint8_t* out,
                       std::size_t max_decoded_bytes, int resize_shorter_side) {
  TrimOnExit trim_after;
  return decode_image_kept(path, target, out, max_decoded_bytes, resize_shorter_side);
}

ImageInfo decode_image(const std::filesystem::path& path, SampleShape target, float* out,
                       std::size_t max_decoded_bytes, int resize_shorter_side) {
  TrimOnExit trim_after;  // after the copy below
  std::vector<std::uint8_t>& sample = decode_scratch().sample;
  sample.resize(target.elements());
  const ImageInfo info = decode_image_kept(path, target, sample.data(), max_decoded_bytes, resize_shorter_side);
  to_float(sample.data(), sample.size(), out);
  return info;
}

ImageInfo decode_window(const std::filesystem::path& path, SampleShape target, const WindowChooser& choose,
                        bool mirror, float* out, std::size_t max_decoded_bytes) {
  check_target_channels(path, target.channels);
  TrimOnExit trim_after;
  ImageWindow window;
  const Decoded d = decode_pixels(path, target.channels, max_decoded_bytes, [&](const ImageInfo& stored) {
    window = checked_window(choose, stored.height, stored.width);
    // The window keeps at least the target's pixels along each side.
    auto least = [](std::int64_t side, std::int64_t window_side, std::int64_t target_side) {
      return (side * target_side + window_side - 1) / window_side;
    };
    return MinimumSize{least(stored.height, window.height, target.height),
                       least(stored.width, window.width, target.width)};
  });
  const double s = 1.0 / d.denominator;
  const SourceWindow source{window.top * s, window.left * s, window.height * s, window.width * s};
  resize_window_hwc_to_chw(d.pixels, d.height, d.width, target.channels, out, target.height, target.width, source,
                           mirror);
  return d.stored;
}

void decode_kept(const std::filesystem::path& path, int channels, int height, int width, const ImageInfo& stored,
                 std::uint8_t* out, std::size_t max_decoded_bytes) {
  check_target_channels(path, channels);
  TrimOnExit trim_after;
  const Decoded d = decode_pixels(path, channels, max_decoded_bytes, [&](const ImageInfo&) {
    return MinimumSize{height, width};
  });
  if (d.stored.height != stored.height || d.stored.width != stored.width)
    fail(path, "changed since the data set was opened: " + std::to_string(d.stored.width) + "x" +
                   std::to_string(d.stored.height) + " now, " + std::to_string(stored.width) + "x" +
                   std::to_string(stored.height) + " then");
  resize_bilinear_hwc_to_chw(d.pixels, d.height, d.width, channels, out, height, width);
}

namespace {

// What a PNG's header says it holds, for a mask that is not 8-bit grey.
std::string png_kind(int bit_depth, int colour_type) {
  std::string kind;
  switch (colour_type) {
    case 0: kind = "greyscale"; break;
    case 2: kind = "RGB colour"; break;
    case 3: kind = "palette (indexed colour)"; break;
    case 4: kind = "greyscale with alpha"; break;
    case 6: kind = "RGBA colour"; break;
    default: kind = "colour type " + std::to_string(colour_type);
  }
  return "a " + std::to_string(bit_depth) + "-bit " + kind + " PNG";
}

}  // namespace

Mask decode_mask(const std::filesystem::path& path, std::size_t max_decoded_bytes) {
  const char* const kExpected =
      "a segmentation mask is an 8-bit greyscale PNG, one class index a pixel (255: ignored)";
  CheckedImage image = read_checked_image(path, max_decoded_bytes);
  if (!has_png_signature(image.bytes.data(), image.bytes.size())) fail(path, std::string("not a PNG: ") + kExpected);
  // IHDR follows the signature: length, "IHDR", width, height, bit depth, colour type.
  constexpr std::size_t kBitDepthAt = 24, kColourTypeAt = 25;
  if (image.bytes.size() <= kColourTypeAt || std::memcmp(image.bytes.data() + 12, "IHDR", 4) != 0)
    fail(path, "corrupt PNG: its first chunk is not IHDR");
  const int bit_depth = image.bytes[kBitDepthAt], colour_type = image.bytes[kColourTypeAt];
  if (bit_depth != 8 || colour_type != 0) fail(path, png_kind(bit_depth, colour_type) + ": " + kExpected);
  int width = 0, height = 0, channels = 0;
  std::unique_ptr<stbi_uc, void (*)(void*)> pixels(
      stbi_load_from_memory(image.bytes.data(), static_cast<int>(image.bytes.size()), &width, &height, &channels, 1),
      stbi_image_free);
  if (!pixels) fail(path, "corrupt image, decoding failed: " + reason());
  if (width != image.info.width || height != image.info.height)
    fail(path, "corrupt image: decoded as " + std::to_string(width) + "x" + std::to_string(height) +
                   ", its header gives " + std::to_string(image.info.width) + "x" + std::to_string(image.info.height));
  Mask mask{image.info, {}};
  mask.info.channels = 1;
  mask.values.assign(pixels.get(), pixels.get() + static_cast<std::size_t>(width) * static_cast<std::size_t>(height));
  return mask;
}

}  // namespace cnn::data
