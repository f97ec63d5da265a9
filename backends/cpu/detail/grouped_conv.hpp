#pragma once
// The CPU's grouped convolution (groups > 1, not depthwise) at stride 1: an implicit product over
// zero-padded copies of each group's planes, with no column matrix and no per-product packing.
// The backend's convolution calls dispatch here (cpu_conv.cpp); cpu_grouped_conv.cpp has the
// loops. Groups 1 keeps im2col + GEMM (and its recorded bits).
#include <cstddef>

#include <cnnengine/engine/core/backend.hpp>

namespace cnn::cpu {

// True where these kernels run the convolution: groups > 1 and not depthwise, stride 1,
// padding at most dilation x (kernel - 1) (backward-data is then a forward pass over dy), and a
// build with AVX-512 or AVX2 + FMA.
bool grouped_kernels_apply(const Conv2dDesc& d);

// Floats of workspace a pass needs (both backward calls share the backward size).
std::size_t grouped_workspace_floats(const Conv2dDesc& d, const Shape& x, const Shape& y, ConvPass pass, int threads);

// accumulate: y += the convolution + bias.
void grouped_forward(int threads, const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y,
                     bool accumulate, Workspace ws);
void grouped_backward_data(int threads, const Conv2dDesc& d, const Tensor& dy, const Tensor& w, Tensor dx,
                           bool accumulate, Workspace ws);
// dw += the weight gradient, dbias += the bias gradient (when given).
void grouped_backward_filter(int threads, const Conv2dDesc& d, const Tensor& x, const Tensor& dy, Tensor dw,
                             Tensor dbias, Workspace ws);

}  // namespace cnn::cpu
