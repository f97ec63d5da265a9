// The transposed convolution and its type, "deconv". Every pass is a convolution call on the
// adjoint convolution (from this layer's output to its input; its weights [in, out, kh, kw] are
// PyTorch's ConvTranspose2d layout):
//   forward          y  = backward-data of the adjoint, reading x as its output gradient; + bias
//   backward, data   dx (+)= forward of the adjoint on dy (the call adds where dx accumulates)
//   backward, filter dw += backward-filter of the adjoint with x and dy swapped; dbias from dy
// So the workspace a pass needs is what the backend asks for the adjoint's passes it calls:
// forward calls backward-data (ConvPass::backward), backward calls forward and backward-filter
// (the larger of ConvPass::forward and ConvPass::backward), and nothing more: the forward call
// adds dx itself. Querying both passes in the backward query also makes the backend choose (and
// remember, per pass, in its plan for the adjoint's shapes) an algorithm for each call made: on
// CUDA the forward algorithm too, which no convolution layer of those shapes need have asked for.
// A call whose remembered algorithm wants more workspace than it is given picks the fastest that
// fits (backends/cuda/conv.cpp).
#include <cnnengine/engine/core/backend.hpp>
#include "layers/conv_transpose2d.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>

#include <cnnengine/base/error.hpp>
#include <cnnengine/layers/builtin_layers.hpp>
#include <cnnengine/layers/registry.hpp>

namespace cnn {

ConvTranspose2D::ConvTranspose2D(int out_channels, int kernel, int stride, int padding, int output_padding, bool bias)
    : out_channels_(out_channels), output_padding_(output_padding), bias_(bias) {
  if (out_channels <= 0 || kernel <= 0 || stride <= 0 || padding < 0)
    throw ConfigError("conv_transpose2d: channels, kernel and stride must be positive and padding not negative");
  if (output_padding < 0 || output_padding >= stride)
    throw ConfigError("conv_transpose2d: output_pad=" + std::to_string(output_padding) +
                      " must be at least 0 and less than the stride (" + std::to_string(stride) + ")");
  adjoint_.in_channels = out_channels;
  adjoint_.kernel_h = adjoint_.kernel_w = kernel;
  adjoint_.stride = stride;
  adjoint_.padding = padding;
}

std::string ConvTranspose2D::describe() const {
  return "conv_transpose2d " + std::to_string(adjoint_.kernel_h) + "x" + std::to_string(adjoint_.kernel_w) + "/" +
         std::to_string(out_channels_) + " stride " + std::to_string(adjoint_.stride) + " pad " +
         std::to_string(adjoint_.padding) + (output_padding_ ? " output_pad " + std::to_string(output_padding_) : "") +
         (bias_ ? "" : " no-bias");
}

Shape ConvTranspose2D::output_shape(const std::vector<Shape>& inputs) {
  const Shape& x = inputs.at(0);
  if (x.rank != 3) throw ShapeError(describe() + ": needs a CxHxW input, got " + x.str());
  auto length = [&](int in) {
    const long long n = (static_cast<long long>(in) - 1) * adjoint_.stride - 2LL * adjoint_.padding +
                        adjoint_.kernel_h + output_padding_;
    if (n < 1 || n > std::numeric_limits<int>::max())
      throw ShapeError(describe() + ": input " + x.str() + " gives an output of " + std::to_string(n) +
                       " pixels across");
    return static_cast<int>(n);
  };
  out_ = Shape{out_channels_, length(x[1]), length(x[2])};
  in_ = x;
  adjoint_.out_channels = x[0];
  // The adjoint convolution maps the output back onto the input: (out + 2 pad - kernel) / stride + 1
  // = in, as output_pad < stride.
  return out_;
}

std::vector<ParamSpec> ConvTranspose2D::parameters() const {
  const int k2 = adjoint_.kernel_h * adjoint_.kernel_w;
  // PyTorch's fans for a [in, out, kh, kw] weight: dimension 1, then 0, times the kernel.
  const int fan_in = out_channels_ * k2, fan_out = adjoint_.out_channels * k2;
  std::vector<ParamSpec> specs{{"weight", Shape{adjoint_.out_channels, out_channels_, adjoint_.kernel_h, adjoint_.kernel_w},
                                Init::fan_in_uniform, fan_in, fan_out, true}};
  if (bias_) specs.push_back({"bias", Shape{out_channels_}, Init::fan_in_uniform, fan_in, fan_out, true});
  return specs;
}

std::size_t ConvTranspose2D::workspace_bytes(Backend& backend, int batch, ConvPass pass, std::size_t limit) {
  const Shape x = out_.batched(batch), y = in_.batched(batch);  // the adjoint's input and output
  if (pass == ConvPass::forward) return backend.conv2d_workspace_bytes(adjoint_, x, y, ConvPass::backward, limit);
  return std::max(backend.conv2d_workspace_bytes(adjoint_, x, y, ConvPass::forward, limit),
                  backend.conv2d_workspace_bytes(adjoint_, x, y, ConvPass::backward, limit));
}

LayerCost ConvTranspose2D::forward_cost() const {
  const double inputs = static_cast<double>(in_.elements()), outputs = static_cast<double>(out_.elements());
  const double macs = inputs * out_channels_ * adjoint_.kernel_h * adjoint_.kernel_w;
  return {2 * macs + (bias_ ? outputs : 0), sizeof(float) * (inputs + outputs), macs};
}

void ConvTranspose2D::forward(const LayerContext& c) {
  c.backend->conv2d_backward_data(adjoint_, c.inputs[0], c.params[0], c.output, false, c.workspace);
  if (bias_) c.backend->add_channel_bias(c.params[1], c.output);
}

void ConvTranspose2D::backward(const LayerContext& c) {
  // x plays the adjoint's output gradient, dy its input.
  c.backend->conv2d_backward_filter(adjoint_, c.grad_output, c.inputs[0], c.grads[0], Tensor{}, c.workspace);
  if (bias_) c.backend->channel_bias_backward(c.grad_output, c.grads[1]);
  if (wants_gradient(c, 0))
    c.backend->conv2d_forward(adjoint_, c.grad_output, c.params[0], Tensor{}, c.grad_inputs[0], c.accumulate[0],
                              c.workspace);
}

}  // namespace cnn

namespace cnn {

LayerType conv_transpose2d_type() {
  LayerType type;
  type.type_name = "conv_transpose2d";
  type.layer_class = &typeid(ConvTranspose2D);
  type.word = "deconv";
  type.usage = "deconv OUT KERNEL [stride=S] [pad=P] [output_pad=Q] [bias=0|1]";
  type.options = {"stride", "pad", "output_pad", "bias"};
  type.parse = [](LayerLine& line) {
    line.expect_arguments(2);
    return std::make_unique<ConvTranspose2D>(line.whole_number(0), line.whole_number(1), line.whole_option("stride", 1),
                                             line.whole_option("pad", 0), line.whole_option("output_pad", 0),
                                             line.flag_option("bias", true));
  };
  type.text = [](const Layer& layer, std::span<const std::string>) {
    const auto& l = static_cast<const ConvTranspose2D&>(layer);
    std::string words = std::to_string(l.out_channels()) + " " + std::to_string(l.kernel());
    if (l.stride() != 1) words += " stride=" + std::to_string(l.stride());
    if (l.padding() != 0) words += " pad=" + std::to_string(l.padding());
    if (l.output_padding() != 0) words += " output_pad=" + std::to_string(l.output_padding());
    return words + (l.has_bias() ? "" : " bias=0");
  };
  type.onnx = [](const Layer& layer, OnnxNodes& graph) {
    const auto& l = static_cast<const ConvTranspose2D&>(layer);
    std::vector<std::string> inputs{graph.input(0), graph.parameter(0, "weight")};
    if (l.has_bias()) inputs.push_back(graph.parameter(1, "bias"));
    const std::int64_t k = l.kernel(), s = l.stride(), p = l.padding(), q = l.output_padding();
    graph.add_output_node("ConvTranspose", inputs)
        .set_ints("kernel_shape", {k, k})
        .set_ints("strides", {s, s})
        .set_ints("pads", {p, p, p, p})
        .set_ints("output_padding", {q, q})
        .set_ints("dilations", {1, 1})
        .set_int("group", 1);
  };
  return type;
}

std::unique_ptr<Layer> layers::conv_transpose2d(int out_channels, int kernel, int stride, int padding,
                                                int output_padding, bool bias) {
  return std::make_unique<ConvTranspose2D>(out_channels, kernel, stride, padding, output_padding, bias);
}

}  // namespace cnn
