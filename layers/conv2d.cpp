#include "layers/conv2d.hpp"

#include "base/error.hpp"
#include "layers/builtin_layers.hpp"
#include "layers/registry.hpp"

namespace cnn {

Conv2D::Conv2D(int out_channels, int kernel, int stride, int padding, bool bias) : bias_(bias) {
  if (out_channels <= 0 || kernel <= 0 || stride <= 0 || padding < 0)
    throw ConfigError("conv2d: channels, kernel and stride must be positive and padding not negative");
  desc_.out_channels = out_channels;
  desc_.kernel_h = desc_.kernel_w = kernel;
  desc_.stride = stride;
  desc_.padding = padding;
}

std::string Conv2D::describe() const {
  return "conv2d " + std::to_string(desc_.kernel_h) + "x" + std::to_string(desc_.kernel_w) + "/" +
         std::to_string(desc_.out_channels) + " stride " + std::to_string(desc_.stride) + " pad " +
         std::to_string(desc_.padding) + (bias_ ? "" : " no-bias");
}

Shape Conv2D::output_shape(const std::vector<Shape>& inputs) {
  const Shape& x = inputs.at(0);
  if (x.rank != 3) throw ShapeError(describe() + ": needs a CxHxW input, got " + x.str());
  desc_.in_channels = x[0];
  in_ = x;
  out_ = Shape{desc_.out_channels, sliding_output(describe(), "kernel", x[1], desc_.kernel_h, desc_.stride, desc_.padding),
               sliding_output(describe(), "kernel", x[2], desc_.kernel_w, desc_.stride, desc_.padding)};
  return out_;
}

std::vector<ParamSpec> Conv2D::parameters() const {
  const int fan_in = desc_.in_channels * desc_.kernel_h * desc_.kernel_w;
  const int fan_out = desc_.out_channels * desc_.kernel_h * desc_.kernel_w;
  std::vector<ParamSpec> specs{{"weight",
                                Shape{desc_.out_channels, desc_.in_channels, desc_.kernel_h, desc_.kernel_w},
                                Init::he_normal, fan_in, fan_out, true}};
  if (bias_) specs.push_back({"bias", Shape{desc_.out_channels}, Init::zeros, fan_in, fan_out, true});
  return specs;
}

std::size_t Conv2D::workspace_bytes(Backend& backend, int batch, ConvPass pass, std::size_t limit) {
  return backend.conv2d_workspace_bytes(desc_, in_.batched(batch), out_.batched(batch), pass, limit);
}

LayerCost Conv2D::forward_cost() const {
  const double outputs = static_cast<double>(out_.elements());
  const double macs = outputs * desc_.in_channels * desc_.kernel_h * desc_.kernel_w;
  return {2 * macs + (bias_ ? outputs : 0), sizeof(float) * (static_cast<double>(in_.elements()) + outputs)};
}

void Conv2D::forward(const LayerContext& c) {
  c.backend->conv2d_forward(desc_, c.inputs[0], c.params[0], bias_ ? c.params[1] : Tensor{}, c.output, c.workspace);
}

void Conv2D::backward(const LayerContext& c) {
  c.backend->conv2d_backward_filter(desc_, c.inputs[0], c.grad_output, c.grads[0], bias_ ? c.grads[1] : Tensor{},
                                    c.workspace);
  if (wants_gradient(c, 0))
    c.backend->conv2d_backward_data(desc_, c.grad_output, c.params[0], c.grad_inputs[0], c.accumulate[0], c.workspace);
}

}  // namespace cnn

namespace cnn {

LayerType conv2d_type() {
  LayerType type;
  type.type_name = "conv2d";
  type.layer_class = &typeid(Conv2D);
  type.word = "conv";
  type.usage = "conv OUT KERNEL [stride=S] [pad=P] [bias=0|1]";
  type.options = {"stride", "pad", "bias"};
  type.parse = [](LayerLine& line) {
    line.expect_arguments(2);
    const int out = line.whole_number(0), kernel = line.whole_number(1);
    const int stride = line.whole_option("stride", 1), pad = line.whole_option("pad", 0);
    return std::make_unique<Conv2D>(out, kernel, stride, pad, line.flag_option("bias", true));
  };
  type.text = [](const Layer& layer, std::span<const std::string>) {
    const auto& conv = static_cast<const Conv2D&>(layer);
    const Conv2dDesc& d = conv.desc();
    std::string words = std::to_string(d.out_channels) + " " + std::to_string(d.kernel_h);
    if (d.stride != 1) words += " stride=" + std::to_string(d.stride);
    if (d.padding != 0) words += " pad=" + std::to_string(d.padding);
    return words + (conv.has_bias() ? "" : " bias=0");
  };
  type.onnx = [](const Layer& layer, OnnxNodes& graph) {
    const auto& conv = static_cast<const Conv2D&>(layer);
    const Conv2dDesc& d = conv.desc();
    std::vector<std::string> inputs{graph.input(0), graph.parameter(0, "weight")};
    if (conv.has_bias()) inputs.push_back(graph.parameter(1, "bias"));
    graph.add_output_node("Conv", inputs)
        .set_ints("kernel_shape", {d.kernel_h, d.kernel_w})
        .set_ints("strides", {d.stride, d.stride})
        .set_ints("pads", {d.padding, d.padding, d.padding, d.padding})
        .set_ints("dilations", {1, 1})
        .set_int("group", 1);
  };
  return type;
}

std::unique_ptr<Layer> layers::conv2d(int out_channels, int kernel, int stride, int padding, bool bias) {
  return std::make_unique<Conv2D>(out_channels, kernel, stride, padding, bias);
}

}  // namespace cnn
