#pragma once
// The CPU's depthwise convolution (groups = in = out channels: one kh x kw filter per channel):
// direct loops over each (image, channel) plane, memory-bound, with no column matrix. The
// backend's convolution calls dispatch here (cpu_conv.cpp); cpu_depthwise_conv.cpp has the loops.
#include <cstddef>

#include <cnnengine/engine/core/backend.hpp>

namespace cnn::cpu {

inline bool is_depthwise(const Conv2dDesc& d) {
  return d.groups == d.in_channels && d.groups == d.out_channels && d.groups > 0;
}

// Floats of workspace a pass needs: where blocked (below), a padded block and an unpadded one per
// range of blocks; otherwise per range of planes, the copies of a plane its loops read and
// an output plane; small "same" planes add column masks shared by all ranges; backward adds
// backward-filter's lane sums and, where it runs by plane, partial sums of the weight and bias
// gradients (reduced in a fixed order). The kernels check their workspace against it.
std::size_t depthwise_workspace_floats(const Conv2dDesc& d, const Shape& x, ConvPass pass, int threads);

// accumulate: y += the convolution + bias.
void depthwise_forward(int threads, const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y,
                       bool accumulate, Workspace ws);
void depthwise_backward_data(int threads, const Conv2dDesc& d, const Tensor& dy, const Tensor& w, Tensor dx,
                             bool accumulate, Workspace ws);
void depthwise_backward_filter(int threads, const Conv2dDesc& d, const Tensor& x, const Tensor& dy, Tensor dw,
                               Tensor dbias, Workspace ws);

// Planes up to MobileNet's largest run 16 channels at a time, channels innermost
// (cpu_depthwise_blocked.cpp): quicker than by plane at every size measured up to 112 x 112 (2 x
// on 14x14 planes at stride 2, 1.7 x on 7x7, 1.4 x backward on 112 x 112), at the cost of a
// padded 16-channel block per thread (1.6 MB at 112 x 112). Larger planes run by plane.
constexpr std::size_t kBlockedMostPixels = 112 * 112;
bool depthwise_blocked(const Conv2dDesc& d, const Shape& x);
std::size_t depthwise_blocked_floats(const Conv2dDesc& d, const Shape& x, ConvPass pass, int threads);
void depthwise_blocked_forward(int threads, const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& bias,
                               Tensor y, bool accumulate, Workspace ws);
void depthwise_blocked_backward_data(int threads, const Conv2dDesc& d, const Tensor& dy, const Tensor& w, Tensor dx,
                                     bool accumulate, Workspace ws);
void depthwise_blocked_backward_filter(int threads, const Conv2dDesc& d, const Tensor& x, const Tensor& dy, Tensor dw,
                                       Tensor dbias, Workspace ws);

}  // namespace cnn::cpu
