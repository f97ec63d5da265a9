#pragma once
// The CPU's fp32 3x3 convolution at stride 1 by Winograd's minimal filtering (Lavin and Gray,
// "Fast Algorithms for Convolutional Neural Networks", 2015): the forward pass in F(4x4, 3x3),
// each 4x4 output tile from a 6x6 input tile through 36 products instead of 144, and both
// backward passes in the more accurate F(2x2, 3x3), 16 instead of 36 (Note [Winograd tiles],
// winograd_tiles.hpp). What is left of the multiply-adds is one matrix product per point of the
// tile. The backend's convolution calls dispatch here (cpu_conv.cpp); cpu_winograd_conv.cpp has
// the passes, winograd_tiles.inl the tile transforms.
#include <cstddef>

#include <cnnengine/engine/core/backend.hpp>

namespace cnn::cpu {

// True where these passes can run the convolution: fp32 products (not bf16 or fp16), groups 1,
// a 3x3 kernel at stride 1 and dilation 1, padding 0 to 2 (backward-data is then a forward pass
// over dy), and an output.
bool winograd_supports(const Conv2dDesc& d, const Shape& x, bool products16);

// True where the backend runs them (cpu_conv.cpp): supported, where they were measured faster
// than im2col + GEMM (at least 32 channels in and out, in x out x output pixels of at least 2^18
// and outputs of at least 8x8: below, the tile transforms outweigh the products they save;
// unet's 256-channel 4x4 layer ran 1.5x slower; small's 32 -> 64 on 14 x 14, 2^18.6, takes
// backward-data 1.11x and backward-filter 1.11x faster, its forward pass the direct kernel's),
// and where blocks of at least 32 output channels keep the transformed weights within the layer's
// larger activation (Note [Output channels in blocks], cpu_winograd_conv.cpp: a 512-channel
// layer's all at once take 38 MB).
bool winograd_applies(const Conv2dDesc& d, const Shape& x, bool products16, int threads);

// While one lives, no convolution runs here (im2col + GEMM takes them): benchmarks compare the
// two. Around whole runs, as cpu::IsaLimit: a plan's workspaces depend on it.
class WinogradOff {
 public:
  WinogradOff();
  ~WinogradOff();
  WinogradOff(const WinogradOff&) = delete;
  WinogradOff& operator=(const WinogradOff&) = delete;
};

// Floats of workspace a pass needs at this batch (both backward calls share the backward size).
std::size_t winograd_workspace_floats(const Conv2dDesc& d, const Shape& x, const Shape& y, ConvPass pass, int threads);

// accumulate: y += the convolution + bias.
void winograd_forward(int threads, const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y,
                      bool accumulate, Workspace ws);
void winograd_backward_data(int threads, const Conv2dDesc& d, const Tensor& dy, const Tensor& w, Tensor dx,
                            bool accumulate, Workspace ws);
// dw += the weight gradient, dbias += the bias gradient (when given).
void winograd_backward_filter(int threads, const Conv2dDesc& d, const Tensor& x, const Tensor& dy, Tensor dw,
                              Tensor dbias, Workspace ws);

}  // namespace cnn::cpu
