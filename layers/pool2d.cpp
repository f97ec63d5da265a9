#include "layers/pool2d.hpp"

#include "base/error.hpp"
#include "layers/builtin_layers.hpp"
#include "layers/registry.hpp"

namespace cnn {

Pool2D::Pool2D(PoolMode mode, int window, int stride, int padding) {
  if (window <= 0 || stride < 0 || padding < 0 || padding >= window)
    throw ConfigError("pool2d: window must be positive and padding smaller than the window");
  desc_.mode = mode;
  desc_.window_h = desc_.window_w = window;
  desc_.stride_h = desc_.stride_w = stride ? stride : window;
  desc_.pad_h = desc_.pad_w = padding;
}

Pool2D Pool2D::global_average() {
  Pool2D layer(PoolMode::average, 1);
  layer.global_ = true;
  return layer;
}

std::string Pool2D::type_name() const {
  if (global_) return "global_avgpool";
  return desc_.mode == PoolMode::max ? "maxpool2d" : "avgpool2d";
}

std::string Pool2D::describe() const {
  if (global_) return type_name();
  return type_name() + " " + std::to_string(desc_.window_h) + " stride " + std::to_string(desc_.stride_h) +
         (desc_.pad_h ? " pad " + std::to_string(desc_.pad_h) : "");
}

Shape Pool2D::output_shape(const std::vector<Shape>& inputs) {
  const Shape& x = inputs.at(0);
  if (x.rank != 3) throw ShapeError(describe() + ": needs a CxHxW input, got " + x.str());
  in_elements_ = static_cast<double>(x.elements());
  Shape y{x[0], 1, 1};
  if (global_) {
    desc_.window_h = desc_.stride_h = x[1];
    desc_.window_w = desc_.stride_w = x[2];
  } else {
    y = Shape{x[0], sliding_output(describe(), "window", x[1], desc_.window_h, desc_.stride_h, desc_.pad_h),
              sliding_output(describe(), "window", x[2], desc_.window_w, desc_.stride_w, desc_.pad_w)};
  }
  out_elements_ = static_cast<double>(y.elements());
  return y;
}

LayerCost Pool2D::forward_cost() const {
  return {out_elements_ * desc_.window_h * desc_.window_w, sizeof(float) * (in_elements_ + out_elements_)};
}

void Pool2D::backward(const LayerContext& c) {
  if (wants_gradient(c, 0))
    c.backend->pool2d_backward(desc_, c.inputs[0], c.output, c.grad_output, c.grad_inputs[0], c.accumulate[0]);
}

}  // namespace cnn

namespace cnn {
namespace {

// maxpool and avgpool: WINDOW [stride=S] [pad=P], stride by default the window.
LayerType windowed_pool_type(PoolMode mode) {
  const bool max = mode == PoolMode::max;
  LayerType type;
  type.type_name = max ? "maxpool2d" : "avgpool2d";
  type.layer_class = &typeid(Pool2D);
  type.word = max ? "maxpool" : "avgpool";
  type.usage = type.word + " WINDOW [stride=S] [pad=P]";
  type.options = {"stride", "pad"};
  type.parse = [mode](LayerLine& line) {
    line.expect_arguments(1);
    const int window = line.whole_number(0);
    const int stride = line.whole_option("stride", 0);
    return std::make_unique<Pool2D>(mode, window, stride, line.whole_option("pad", 0));
  };
  type.text = [](const Layer& layer, std::span<const std::string>) {
    const Pool2dDesc& d = static_cast<const Pool2D&>(layer).desc();
    std::string words = std::to_string(d.window_h);
    if (d.stride_h != d.window_h) words += " stride=" + std::to_string(d.stride_h);
    if (d.pad_h != 0) words += " pad=" + std::to_string(d.pad_h);
    return words;
  };
  // Ours floor the output size (ceil_mode 0) and average over the window's input elements
  // alone, padding left out of the count.
  type.onnx = [max](const Layer& layer, OnnxNodes& graph) {
    const Pool2dDesc& d = static_cast<const Pool2D&>(layer).desc();
    OnnxNode& node = graph.add_output_node(max ? "MaxPool" : "AveragePool", {graph.input(0)})
                         .set_ints("kernel_shape", {d.window_h, d.window_w})
                         .set_ints("strides", {d.stride_h, d.stride_w})
                         .set_ints("pads", {d.pad_h, d.pad_w, d.pad_h, d.pad_w})
                         .set_int("ceil_mode", 0);
    if (!max) node.set_int("count_include_pad", 0);
  };
  return type;
}

}  // namespace

LayerType max_pool2d_type() { return windowed_pool_type(PoolMode::max); }

LayerType average_pool2d_type() { return windowed_pool_type(PoolMode::average); }

LayerType global_average_pool_type() {
  LayerType type;
  type.type_name = "global_avgpool";
  type.layer_class = &typeid(Pool2D);
  type.word = type.usage = "globalavgpool";
  type.parse = [](LayerLine& line) {
    line.expect_arguments(0);
    return std::make_unique<Pool2D>(Pool2D::global_average());
  };
  type.onnx = [](const Layer&, OnnxNodes& graph) { graph.add_output_node("GlobalAveragePool", {graph.input(0)}); };
  return type;
}

std::unique_ptr<Layer> layers::max_pool2d(int window, int stride, int padding) {
  return std::make_unique<Pool2D>(PoolMode::max, window, stride, padding);
}

std::unique_ptr<Layer> layers::avg_pool2d(int window, int stride, int padding) {
  return std::make_unique<Pool2D>(PoolMode::average, window, stride, padding);
}

std::unique_ptr<Layer> layers::global_avg_pool2d() { return std::make_unique<Pool2D>(Pool2D::global_average()); }

}  // namespace cnn
