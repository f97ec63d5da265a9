#pragma once
// The CPU's direct fp32 convolution for small maps of many channels (resnet's 512-channel 7x7
// layers) and for narrow layers of 16 to 48 channels (resnet's on 1x28x28): no column matrix and no
// matrix product, but each output pixel's 64, 32 or 16 channels summed in registers from the image
// and the weights, both reordered into blocks of channels inside the call (Note [Direct
// convolution in blocks of channels], cpu_direct_conv.cpp). AVX-512 hosts run every kernel; AVX2
// hosts the blocked ones (cpu_direct_tiles_avx2.cpp, the same bits), where measured faster
// there; elsewhere im2col + GEMM and Winograd take these layers. Backward-data runs as a
// forward pass over dy (Note [Backward-data as a convolution], cpu_conv.cpp), at stride 2 as four
// of them, one a phase of dx (Note [Stride-2 backward-data in phases]); backward-filter has its
// own kernel (Note [Direct backward-filter]).
#include <cnnengine/engine/core/backend.hpp>
#include <cstddef>

namespace cnn::cpu {

enum class DirectPass { forward, backward_data, backward_filter };

// True where the direct kernels run this pass of the convolution: fp32 products, an AVX-512 host
// (AVX2: below), groups 1, a 3x3 kernel at dilation 1, padding at most 2, channels in and out in
// multiples of 16, where measured faster than the other paths (conv_peak on resnet, resnet18,
// resnet50, small and unet, Zen 4). At stride 2, forward (1.1x to 1.25x im2col + GEMM), backward-data in phases
// (1.05x to 1.33x on resnet50's and resnet18's, 2.2x on resnet's 16-channel dx; not where a narrow
// dx meets dy under 8 a side: 0.85x), backward-filter (1.3x to 1.5x on outputs of 14 to 56 a side,
// level at 112; narrow layers 1.4x to 5x). At stride 1, wide layers (a tile's
// 64 outputs, and backward-filter's 64 input channels): outputs under 8 pixels a side, where the
// Winograd passes do not apply (1.2x to 1.4x im2col + GEMM), and, forward, outputs of at most
// 14 x 14, where Winograd's F(4x4) tiles fit badly or its transforms outweigh what they save (1.05x
// to 1.2x). Narrow layers (tiles of 16 or 32 outputs, or backward-filter's of 16 or 32 input
// channels), where im2col + GEMM runs at 40% to 60% of the peak: every pass of fewer than 32
// channels in or out, which Winograd does not take (1.2x to 2.3x on maps of 28 to 112 a side), and
// where Winograd could, outputs of at most 14 x 14, and backward up to 28 x 28 (1.1x to 1.4x; on
// larger maps Winograd is faster). Convolutions of fewer than 16 channels (an image's), forward
// and backward-filter: the ImageNet stem, a 7x7 at stride 2, padding at most 3, into a multiple of
// 64 (forward with vectors along the pixels, pixel_conv.hpp, 1.25x the blocked kernel's;
// backward-filter along the outputs, Note [The stem's backward-filter]); a 3x3 at stride 1 or 2,
// padding at most 2, into a multiple of 16, both passes along the pixels (1.3x to 1.6x im2col +
// GEMM forward, 1.1x to 1.9x the kernel along the outputs backward).
// 1x1 convolutions (padding 0, stride 1 or 2, channels in multiples of 16): backward-filter where
// the input channels are a multiple of 32 (two vectors or more a pixel: 1.05x to 3x the GEMM's,
// which packs x^T; level on a few of mobilenetv2's, 0.89x on resnet50's 512 -> 1024 at stride 2;
// with one vector 0.65x); forward where the outputs are under 8 a side (1.02x to 1.27x), and
// backward-data there at stride 1 (1.05x to 1.1x).
// On AVX2 hosts (16 registers of 8 floats: tiles of 16 outputs x 6 pixels, or of 6 outputs x 16
// input channels backward-filter), of those, the passes over at most 64 channels in (x's, or dy's
// for backward-data) but the few channels of an image; 1x1 layers backward-filter only; at stride 2
// backward-data into fewer than 64 (conv_peak on resnet, resnet18, resnet34, small, small-bn and
// unet, Zen 3: 1.1x to 3x; over more channels 0.55x to 1.47x, from run to run, 1x1 forward 0.6x).
bool direct_applies(const Conv2dDesc& d, const Shape& x, bool products16, DirectPass pass);

// While one lives, these passes run no convolution (benchmarks and tests compare with the GEMM's).
// Around whole runs, as cpu::IsaLimit: a plan's workspaces depend on it.
class DirectOff {
 public:
  DirectOff();
  ~DirectOff();
  DirectOff(const DirectOff&) = delete;
  DirectOff& operator=(const DirectOff&) = delete;
};

// Floats of workspace a pass needs at this batch: forward and backward-data the reordered weights,
// then one reordered image and its sums a thread; backward-filter a partial gradient and up to 8
// reordered images a thread, or one partial and up to 8 images for all the threads where they
// split the outputs (the stem's: one padded image and a row of dy turned).
std::size_t direct_workspace_floats(const Conv2dDesc& d, const Shape& x, const Shape& y, DirectPass pass, int threads);

// accumulate: y += the convolution + bias; relu (never with accumulate): y = max(that, 0), as
// relu_forward gives it, in the pass that writes y.
void direct_forward(int threads, const Conv2dDesc& d, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y,
                    bool accumulate, Workspace ws, bool relu = false);
void direct_backward_data(int threads, const Conv2dDesc& d, const Tensor& dy, const Tensor& w, Tensor dx,
                          bool accumulate, Workspace ws);
// dw += the weight gradient, dbias += the bias gradient (when given).
void direct_backward_filter(int threads, const Conv2dDesc& d, const Tensor& x, const Tensor& dy, Tensor dw,
                            Tensor dbias, Workspace ws);

}  // namespace cnn::cpu
