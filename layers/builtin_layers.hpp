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

#include "engine/core/layer.hpp"

namespace cnn::layers {

// 2-D convolution of square kernels (PyTorch's Conv2d): NCHW in, `out_channels` maps out, the
// input zero-padded by `padding` on each side.
std::unique_ptr<Layer> conv2d(int out_channels, int kernel, int stride = 1, int padding = 0, bool bias = true);
// Fully connected (Keras's Dense, PyTorch's Linear) over a flat input: y = W x + b.
std::unique_ptr<Layer> dense(int units, bool bias = true);
std::unique_ptr<Layer> relu();
// Pooling over `window` x `window` (stride 0: the window, as PyTorch's default); average pooling
// leaves padding out of its count.
std::unique_ptr<Layer> max_pool2d(int window, int stride = 0, int padding = 0);
std::unique_ptr<Layer> avg_pool2d(int window, int stride = 0, int padding = 0);
// The mean of each channel: C x H x W to C x 1 x 1.
std::unique_ptr<Layer> global_avg_pool2d();
// Batch normalisation over N, H and W of each channel, PyTorch's defaults: running statistics
// updated as (1 - momentum) x old + momentum x batch.
std::unique_ptr<Layer> batchnorm2d(float momentum = 0.1f, float epsilon = 1e-5f);
// Zeroes each element with probability p (0 <= p < 1) while training and scales the rest by
// 1 / (1 - p); the identity in inference.
std::unique_ptr<Layer> dropout(float p);
// C x H x W to one dimension of C * H * W (a view: no copy).
std::unique_ptr<Layer> flatten();
// The element-wise sum of two inputs of one shape (a residual connection).
std::unique_ptr<Layer> add();

}  // namespace cnn::layers
