#pragma once
// Bilinear resampling of interleaved 8-bit pixels (HWC, as decoders return them) into planar
// CHW at another size. Pixel centres are aligned (OpenCV INTER_LINEAR, PyTorch
// align_corners=false); samples beyond the edge repeat the edge.
#include <cstdint>

namespace cnn::data {

void resize_bilinear_hwc_to_chw(const std::uint8_t* src, int src_height, int src_width, int channels,
                                std::uint8_t* dst, int dst_height, int dst_width);

}  // namespace cnn::data
