#pragma once
// The CPU's convolution of a few input channels (an image's: RGB or grey; the first layer of
// small, resnet, resnet18 and mobilenetv2) with its vectors along each output row's pixels:
// forward and backward-filter (Note [Vectors along the pixels], cpu_pixel_conv.cpp). AVX-512 hosts
// only; direct_conv.hpp's gate decides where it runs and calls it.
#include <cnnengine/engine/core/backend.hpp>
#include <cstddef>

namespace cnn::cpu {

// The convolutions these kernels take: groups 1, dilation 1, a square kernel of at most 7 at
// stride 1 or 2 with padding under the kernel's side, 1 to 15 input channels, outputs in a multiple
// of 8, at least one output pixel. The passes refuse anything else with std::logic_error.
bool pixel_conv_takes(const Conv2dDesc& d, const Shape& x);

// Floats of workspace: forward the reordered weights, then a padded image a thread;
// backward-filter a partial gradient in vectors and a padded image a thread.
std::size_t pixel_forward_workspace_floats(const Conv2dDesc& d, const Shape& x, int threads);
std::size_t pixel_filter_workspace_floats(const Conv2dDesc& d, const Shape& x, int threads);

// y = (accumulate ? y : 0) + the convolution + bias (when given); with relu, max(that, 0) as
// relu_forward gives it.
void pixel_forward(int threads, const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y,
                   bool accumulate, Workspace ws, bool relu = false);
// dw += the weight gradient, dbias += the bias gradient (when given).
void pixel_backward_filter(int threads, const Conv2dDesc& d, const Tensor& x, const Tensor& dy, Tensor dw, Tensor dbias,
                           Workspace ws);

}  // namespace cnn::cpu
