#pragma once
// The built-in layers as an application adds them to a network, Keras's way:
//
//   net.add(layers::conv2d(32, 3, /*stride*/ 1, /*padding*/ 1));
//   net.add(layers::relu());
//   int skip = net.add(layers::max_pool2d(2));
//   ...
//   net.add(layers::add(), {skip, net.last()});
//
// Each returns a new layer; its class stays in layers/<name>.hpp, in the tree, with the layer's
// text form and ONNX nodes (layers/registry.hpp). Arguments out of range are a ConfigError naming
// the layer, and an input shape a layer cannot take is a ShapeError when the network adds it.
#include <memory>

#include <cnnengine/engine/core/layer.hpp>

namespace cnn::layers {

// 2-D convolution of square kernels (PyTorch's Conv2d): NCHW in, `out_channels` maps out, the
// input zero-padded by `padding` on each side.
std::unique_ptr<Layer> conv2d(int out_channels, int kernel, int stride = 1, int padding = 0, bool bias = true);
// The same with every option: `groups` independent convolutions over as many slices of the
// channels (both channel counts divisible by it), kernel taps `dilation` pixels apart.
struct ConvOptions {
  int stride = 1;
  int padding = 0;
  int dilation = 1;
  int groups = 1;
  bool bias = true;
};
std::unique_ptr<Layer> conv2d(int out_channels, int kernel, const ConvOptions& options);
// Depthwise convolution: one `kernel` x `kernel` filter per channel, as many outputs as inputs
// (groups = channels).
std::unique_ptr<Layer> depthwise_conv2d(int kernel, int stride = 1, int padding = 0, int dilation = 1,
                                        bool bias = true);
// Transposed convolution (PyTorch's ConvTranspose2d): output size (in - 1) x stride - 2 x padding +
// kernel + output_padding.
std::unique_ptr<Layer> conv_transpose2d(int out_channels, int kernel, int stride = 1, int padding = 0,
                                        int output_padding = 0, bool bias = true);
// Fully connected (Keras's Dense, PyTorch's Linear) over a flat input: y = W x + b.
std::unique_ptr<Layer> dense(int units, bool bias = true);
std::unique_ptr<Layer> relu();
// The other activations, PyTorch's definitions (engine/core/backend.hpp, Activation).
std::unique_ptr<Layer> leaky_relu(float slope = 0.01f);
std::unique_ptr<Layer> relu6();
std::unique_ptr<Layer> sigmoid();
std::unique_ptr<Layer> tanh();
std::unique_ptr<Layer> silu();
std::unique_ptr<Layer> gelu();
std::unique_ptr<Layer> hardswish();
std::unique_ptr<Layer> hardsigmoid();
// Pooling over `window` x `window` (stride 0: the window, as PyTorch's default); average pooling
// leaves padding out of its count. ceil_mode: the output size rounds up (PyTorch's ceil_mode), the
// last window clipped to the input.
std::unique_ptr<Layer> max_pool2d(int window, int stride = 0, int padding = 0, bool ceil_mode = false);
std::unique_ptr<Layer> avg_pool2d(int window, int stride = 0, int padding = 0, bool ceil_mode = false);
// The mean of each channel: C x H x W to C x 1 x 1.
std::unique_ptr<Layer> global_avg_pool2d();
// The largest value of each channel: C x H x W to C x 1 x 1.
std::unique_ptr<Layer> global_max_pool2d();
// Each pixel `factor` x `factor` times (nearest), or interpolated (bilinear, align_corners=False).
std::unique_ptr<Layer> upsample(int factor, UpsampleMode mode = UpsampleMode::nearest);
// `value` around each plane, each side its own width (PyTorch's nn.ConstantPad2d((left, right,
// top, bottom), value)).
std::unique_ptr<Layer> pad(int left, int right, int top, int bottom, float value = 0.0f);
// Batch normalisation over N, H and W of each channel, PyTorch's defaults: running statistics
// updated as (1 - momentum) x old + momentum x batch.
std::unique_ptr<Layer> batchnorm2d(float momentum = 0.1f, float epsilon = 1e-5f);
// Group normalisation (PyTorch's GroupNorm): each sample's channels in `groups` groups, each
// normalised on its own, then a per-channel scale and shift. Independent of the batch.
std::unique_ptr<Layer> group_norm(int groups, float epsilon = 1e-5f);
// Layer normalisation over C, H and W (PyTorch's LayerNorm([C, H, W])), scale and shift per element.
std::unique_ptr<Layer> layer_norm(float epsilon = 1e-5f);
// Zeroes each element with probability p (0 <= p < 1) while training and scales the rest by
// 1 / (1 - p); the identity in inference.
std::unique_ptr<Layer> dropout(float p);
// C x H x W to one dimension of C * H * W (a view: no copy).
std::unique_ptr<Layer> flatten();
// The element-wise sum of two inputs of one shape (a residual connection).
std::unique_ptr<Layer> add();
// The channels of every input, in order, as one output (inputs of one H and W).
std::unique_ptr<Layer> concat();
// The element-wise product of two inputs: the second of the first's shape, or C x 1 x 1 (one
// factor per channel: a squeeze-and-excitation gate).
std::unique_ptr<Layer> multiply();

}  // namespace cnn::layers
