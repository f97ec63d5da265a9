#pragma once
// Resampling 8-bit pixels to another size: images bilinear, segmentation masks by nearest
// neighbour (a class between two classes is neither); each either stretched whole to the output's
// size or framed as torchvision frames a photo for evaluation (its shorter side resized, then the
// centre cropped), or a window of the source resized to the output (a random resized crop).
#include <cstdint>

namespace cnn::data {

// Where an output of dst_height x dst_width lies in its source: the whole source scaled to
// scaled_height x scaled_width, of which the output is the window whose first pixel is at (top,
// left). Stretching is {dst_height, dst_width, 0, 0}.
struct Framing {
  std::int64_t scaled_height = 0, scaled_width = 0, top = 0, left = 0;
};

// shorter_side 0: the whole source stretched to dst. Else torchvision's Resize(shorter_side) then
// CenterCrop(dst): the shorter side scaled to shorter_side, the longer to
// floor(shorter_side x longer / shorter), then the window of dst's size at
// round((scaled - dst) / 2) (half to even, as Python's round). shorter_side must be at least
// dst_height and dst_width (the caller checks: the window then lies inside the scaled image).
Framing frame_image(int src_height, int src_width, int dst_height, int dst_width, int shorter_side);

// Interleaved pixels (HWC, as decoders return them) into planar CHW. Pixel centres are aligned
// (OpenCV INTER_LINEAR, PyTorch align_corners=false, without antialiasing); samples beyond the
// edge repeat the edge.
void resize_bilinear_hwc_to_chw(const std::uint8_t* src, int src_height, int src_width, int channels,
                                std::uint8_t* dst, int dst_height, int dst_width, const Framing& framing);
void resize_bilinear_hwc_to_chw(const std::uint8_t* src, int src_height, int src_width, int channels,
                                std::uint8_t* dst, int dst_height, int dst_width);

// A window of the source, in its pixels: rows [top, top + height), columns [left, left + width).
// Fractions are allowed (a window of a source decoded at a reduced scale).
struct SourceWindow {
  double top = 0, left = 0, height = 0, width = 0;
};

// The window resized to dst_height x dst_width as torchvision's resized_crop does (the window cut
// out, then resized with pixel centres aligned, samples beyond the window's edge repeating its
// edge), without antialiasing; mirrored left-right when `mirror`. Interleaved 8-bit pixels in,
// planar floats of [0, 1] out.
void resize_window_hwc_to_chw(const std::uint8_t* src, int src_height, int src_width, int channels, float* dst,
                              int dst_height, int dst_width, const SourceWindow& window, bool mirror);
// The same from planar floats.
void resize_window_chw(const float* src, int src_height, int src_width, int channels, float* dst, int dst_height,
                       int dst_width, const SourceWindow& window, bool mirror);

// The same from planar 8-bit pixels (the decoded cache's), separably: each source row the window
// reads is resampled along x once, then each output row blends two of those.
void resize_window_planar(const std::uint8_t* src, int src_height, int src_width, int channels, float* dst,
                          int dst_height, int dst_width, const SourceWindow& window, bool mirror);

// One plane, each output pixel the source pixel floor((y + top) * src / scaled) (and alike for
// x): PyTorch's interpolate(mode="nearest"), torchvision's Resize(NEAREST). No value is made up.
void resize_nearest(const std::uint8_t* src, int src_height, int src_width, std::uint8_t* dst, int dst_height,
                    int dst_width, const Framing& framing);
void resize_nearest(const std::uint8_t* src, int src_height, int src_width, std::uint8_t* dst, int dst_height,
                    int dst_width);

}  // namespace cnn::data
