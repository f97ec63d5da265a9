#pragma once
// The CPU's depthwise convolution (groups = in = out channels: one kh x kw filter per channel):
// direct loops over each (image, channel) plane, memory-bound, with no column matrix. The
// backend's convolution calls dispatch here (cpu_conv.cpp); cpu_depthwise_conv.cpp has the loops.
#include <cstddef>

#include "engine/core/backend.hpp"

namespace cnn::cpu {

inline bool is_depthwise(const Conv2dDesc& d) {
  return d.groups == d.in_channels && d.groups == d.out_channels && d.groups > 0;
}

// Floats of workspace a pass needs: per range of planes, the copies of a plane its loops read and
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

}  // namespace cnn::cpu
