#pragma once
// Resampling 8-bit pixels to another size: images bilinear, segmentation masks by nearest
// neighbour (a class between two classes is neither).
#include <cstdint>

namespace cnn::data {

// Interleaved pixels (HWC, as decoders return them) into planar CHW. Pixel centres are aligned
// (OpenCV INTER_LINEAR, PyTorch align_corners=false); samples beyond the edge repeat the edge.
void resize_bilinear_hwc_to_chw(const std::uint8_t* src, int src_height, int src_width, int channels,
                                std::uint8_t* dst, int dst_height, int dst_width);

// One plane, each output pixel the source pixel floor(y * src / dst), floor(x * src / dst):
// PyTorch's interpolate(mode="nearest"), torchvision's Resize(NEAREST). No value is made up.
void resize_nearest(const std::uint8_t* src, int src_height, int src_width, std::uint8_t* dst, int dst_height,
                    int dst_width);

}  // namespace cnn::data
