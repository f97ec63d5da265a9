// The convolution layer and its two types: "conv" (grouped, dilated) and "dwconv" (depthwise).
#include <cnnengine/engine/core/backend.hpp>
#include "layers/conv2d.hpp"

#include <algorithm>
#include <limits>

#include <cnnengine/base/error.hpp>
#include <cnnengine/layers/builtin_layers.hpp>
#include <cnnengine/layers/registry.hpp>

namespace cnn {

Conv2D::Conv2D(int out_channels, int kernel, int stride, int padding, bool bias) {
  layers::ConvOptions options;
  options.stride = stride;
  options.padding = padding;
  options.bias = bias;
  configure(out_channels, kernel, options, false);
}

Conv2D::Conv2D(int out_channels, int kernel, const layers::ConvOptions& options, bool same_padding) {
  configure(out_channels, kernel, options, same_padding);
}

Conv2D Conv2D::depthwise(int kernel, const layers::ConvOptions& options, bool same_padding) {
  Conv2D layer;
  layer.depthwise_ = true;
  layer.configure(1, kernel, options, same_padding);
  layer.desc_.out_channels = 0;  // the input's, once known
  return layer;
}

void Conv2D::configure(int out_channels, int kernel, const layers::ConvOptions& o, bool same_padding) {
  const std::string name = type_name();
  if (out_channels <= 0 || kernel <= 0 || o.stride <= 0 || o.padding < 0)
    throw ConfigError(name + ": channels, kernel and stride must be positive and padding not negative");
  if (o.dilation <= 0) throw ConfigError(name + ": dilation=" + std::to_string(o.dilation) + " must be positive");
  if (o.groups <= 0) throw ConfigError(name + ": groups=" + std::to_string(o.groups) + " must be positive");
  // The kernel's taps are `dilation` pixels apart: its reach must be a size an input can have.
  const long long reach = static_cast<long long>(o.dilation) * (kernel - 1) + 1;
  if (reach > std::numeric_limits<int>::max())
    throw ConfigError(name + ": a kernel of " + std::to_string(kernel) + " at dilation=" + std::to_string(o.dilation) +
                      " reaches " + std::to_string(reach) + " pixels, more than any input holds");
  desc_.out_channels = out_channels;
  desc_.kernel_h = desc_.kernel_w = kernel;
  desc_.stride = o.stride;
  desc_.padding = o.padding;
  desc_.dilation = o.dilation;
  desc_.groups = o.groups;
  bias_ = o.bias;
  same_ = same_padding;
  if (same_padding) {
    if (kernel % 2 == 0 || o.stride != 1)
      throw ConfigError(name + ": pad=same needs an odd kernel at stride 1 (kernel " + std::to_string(kernel) +
                        ", stride " + std::to_string(o.stride) + "); give the padding as a number");
    desc_.padding = static_cast<int>((reach - 1) / 2);
  }
}

std::string Conv2D::describe() const {
  std::string text = type_name() + " " + std::to_string(desc_.kernel_h) + "x" + std::to_string(desc_.kernel_w);
  if (!depthwise_) text += "/" + std::to_string(desc_.out_channels);
  text += " stride " + std::to_string(desc_.stride) + " pad " + std::to_string(desc_.padding);
  if (desc_.dilation != 1) text += " dilation " + std::to_string(desc_.dilation);
  if (!depthwise_ && desc_.groups != 1) text += " groups " + std::to_string(desc_.groups);
  return text + (bias_ ? "" : " no-bias");
}

Shape Conv2D::output_shape(const std::vector<Shape>& inputs) {
  const Shape& x = inputs.at(0);
  if (x.rank != 3) throw ShapeError(describe() + ": needs a CxHxW input, got " + x.str());
  if (depthwise_) desc_.groups = desc_.out_channels = x[0];
  if (x[0] % desc_.groups != 0 || desc_.out_channels % desc_.groups != 0)
    throw ShapeError(describe() + ": groups=" + std::to_string(desc_.groups) + " must divide both the " +
                     std::to_string(x[0]) + " input channels and the " + std::to_string(desc_.out_channels) +
                     " output channels (input " + x.str() + ")");
  desc_.in_channels = x[0];
  in_ = x;
  // The kernel's reach: its taps are `dilation` pixels apart (a reach beyond an int is refused as
  // larger than the input).
  const long long reach_h = static_cast<long long>(desc_.dilation) * (desc_.kernel_h - 1) + 1;
  const long long reach_w = static_cast<long long>(desc_.dilation) * (desc_.kernel_w - 1) + 1;
  auto reach = [](long long r) { return static_cast<int>(std::min<long long>(r, std::numeric_limits<int>::max())); };
  out_ = Shape{desc_.out_channels,
               sliding_output(describe(), "kernel", x[1], reach(reach_h), desc_.stride, desc_.padding),
               sliding_output(describe(), "kernel", x[2], reach(reach_w), desc_.stride, desc_.padding)};
  return out_;
}

std::vector<ParamSpec> Conv2D::parameters() const {
  const int per_group = desc_.groups > 0 ? desc_.in_channels / desc_.groups : desc_.in_channels;
  const int fan_in = per_group * desc_.kernel_h * desc_.kernel_w;
  const int fan_out = desc_.out_channels * desc_.kernel_h * desc_.kernel_w;  // PyTorch's: weight dim 0 x kernel
  std::vector<ParamSpec> specs{{"weight", Shape{desc_.out_channels, per_group, desc_.kernel_h, desc_.kernel_w},
                                Init::fan_in_uniform, fan_in, fan_out, true}};
  if (bias_) specs.push_back({"bias", Shape{desc_.out_channels}, Init::fan_in_uniform, fan_in, fan_out, true});
  return specs;
}

std::size_t Conv2D::workspace_bytes(Backend& backend, int batch, ConvPass pass, std::size_t limit) {
  return backend.conv2d_workspace_bytes(desc_, in_.batched(batch), out_.batched(batch), pass, limit);
}

LayerCost Conv2D::forward_cost() const {
  const double outputs = static_cast<double>(out_.elements());
  const double macs = outputs * (desc_.in_channels / desc_.groups) * desc_.kernel_h * desc_.kernel_w;
  return {2 * macs + (bias_ ? outputs : 0), sizeof(float) * (static_cast<double>(in_.elements()) + outputs), macs};
}

void Conv2D::forward(const LayerContext& c) {
  c.backend->conv2d_forward(desc_, c.inputs[0], c.params[0], bias_ ? c.params[1] : Tensor{}, c.output, false,
                            c.workspace);
}

void Conv2D::backward(const LayerContext& c) {
  c.backend->conv2d_backward(desc_, c.inputs[0], c.grad_output, c.params[0], c.grads[0], bias_ ? c.grads[1] : Tensor{},
                             wants_gradient(c, 0) ? c.grad_inputs[0] : Tensor{}, wants_gradient(c, 0) && c.accumulate[0],
                             c.workspace);
}

void Conv2D::forward_then_relu(const LayerContext& c) {
  c.backend->conv2d_relu_forward(desc_, c.inputs[0], c.params[0], bias_ ? c.params[1] : Tensor{}, c.output,
                                 c.workspace);
}

}  // namespace cnn

namespace cnn {
namespace {

// The options both words share, read from a line: stride, pad (a number or "same"), dilation, bias.
struct ParsedConvOptions {
  layers::ConvOptions options;
  bool same = false;
};

ParsedConvOptions read_options(LayerLine& line, const char* word) {
  ParsedConvOptions p;
  p.options.stride = line.whole_option("stride", 1);
  const std::string pad = line.text_option("pad", "0");
  if (pad == "same") p.same = true;
  else {
    try {
      p.options.padding = line.whole_option("pad", 0);
    } catch (const ConfigError& e) {
      throw ConfigError(std::string(word) + ": pad= takes a whole number or 'same': " + e.what());
    }
  }
  p.options.dilation = line.whole_option("dilation", 1);
  p.options.bias = line.flag_option("bias", true);
  return p;
}

// " stride=2 pad=1 ..." for the options that are not the default.
std::string option_text(const Conv2D& conv) {
  const Conv2dDesc& d = conv.desc();
  std::string words;
  if (d.stride != 1) words += " stride=" + std::to_string(d.stride);
  if (conv.same_padding()) words += " pad=same";
  else if (d.padding != 0) words += " pad=" + std::to_string(d.padding);
  if (d.dilation != 1) words += " dilation=" + std::to_string(d.dilation);
  if (!conv.is_depthwise() && d.groups != 1) words += " groups=" + std::to_string(d.groups);
  return words + (conv.has_bias() ? "" : " bias=0");
}

void write_onnx(const Layer& layer, OnnxNodes& graph) {
  const auto& conv = static_cast<const Conv2D&>(layer);
  const Conv2dDesc& d = conv.desc();
  std::vector<std::string> inputs{graph.input(0), graph.parameter(0, "weight")};
  if (conv.has_bias()) inputs.push_back(graph.parameter(1, "bias"));
  graph.add_output_node("Conv", inputs)
      .set_ints("kernel_shape", {d.kernel_h, d.kernel_w})
      .set_ints("strides", {d.stride, d.stride})
      .set_ints("pads", {d.padding, d.padding, d.padding, d.padding})
      .set_ints("dilations", {d.dilation, d.dilation})
      .set_int("group", d.groups);
}

}  // namespace

LayerType conv2d_type() {
  LayerType type;
  type.type_name = "conv2d";
  type.layer_class = &typeid(Conv2D);
  type.word = "conv";
  type.usage = "conv OUT KERNEL [stride=S] [pad=P|same] [dilation=D] [groups=G] [bias=0|1]";
  type.options = {"stride", "pad", "dilation", "groups", "bias"};
  type.parse = [](LayerLine& line) {
    line.expect_arguments(2);
    const int out = line.whole_number(0), kernel = line.whole_number(1);
    ParsedConvOptions p = read_options(line, "conv");
    p.options.groups = line.whole_option("groups", 1);
    return std::make_unique<Conv2D>(out, kernel, p.options, p.same);
  };
  type.text = [](const Layer& layer, std::span<const std::string>) {
    const auto& conv = static_cast<const Conv2D&>(layer);
    return std::to_string(conv.desc().out_channels) + " " + std::to_string(conv.desc().kernel_h) + option_text(conv);
  };
  type.onnx = write_onnx;
  return type;
}

LayerType depthwise_conv2d_type() {
  LayerType type;
  type.type_name = "depthwise_conv2d";
  type.layer_class = &typeid(Conv2D);
  type.word = "dwconv";
  type.usage = "dwconv KERNEL [stride=S] [pad=P|same] [dilation=D] [bias=0|1]";
  type.options = {"stride", "pad", "dilation", "bias"};
  type.parse = [](LayerLine& line) -> std::unique_ptr<Layer> {
    line.expect_arguments(1);
    const int kernel = line.whole_number(0);
    const ParsedConvOptions p = read_options(line, "dwconv");
    return std::make_unique<Conv2D>(Conv2D::depthwise(kernel, p.options, p.same));
  };
  type.text = [](const Layer& layer, std::span<const std::string>) {
    const auto& conv = static_cast<const Conv2D&>(layer);
    return std::to_string(conv.desc().kernel_h) + option_text(conv);
  };
  type.onnx = write_onnx;
  return type;
}

std::unique_ptr<Layer> layers::conv2d(int out_channels, int kernel, int stride, int padding, bool bias) {
  return std::make_unique<Conv2D>(out_channels, kernel, stride, padding, bias);
}

std::unique_ptr<Layer> layers::conv2d(int out_channels, int kernel, const ConvOptions& options) {
  return std::make_unique<Conv2D>(out_channels, kernel, options);
}

std::unique_ptr<Layer> layers::depthwise_conv2d(int kernel, int stride, int padding, int dilation, bool bias) {
  ConvOptions options;
  options.stride = stride;
  options.padding = padding;
  options.dilation = dilation;
  options.bias = bias;
  return std::make_unique<Conv2D>(Conv2D::depthwise(kernel, options));
}

}  // namespace cnn
