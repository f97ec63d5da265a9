// Pooling layers: their shapes (floor or ceil mode), gradients and network-text and ONNX types.
#include <cnnengine/engine/core/backend.hpp>
#include "layers/pool2d.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>

#include <cnnengine/base/error.hpp>
#include <cnnengine/layers/builtin_layers.hpp>
#include <cnnengine/layers/registry.hpp>

namespace cnn {

Pool2D::Pool2D(PoolMode mode, int window, int stride, int padding, bool ceil_mode) : ceil_mode_(ceil_mode) {
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

Pool2D Pool2D::global_max() {
  Pool2D layer(PoolMode::max, 1);
  layer.global_ = true;
  return layer;
}

std::string Pool2D::type_name() const {
  if (global_) return desc_.mode == PoolMode::max ? "global_maxpool" : "global_avgpool";
  return desc_.mode == PoolMode::max ? "maxpool2d" : "avgpool2d";
}

std::string Pool2D::describe() const {
  if (global_) return type_name();
  return type_name() + " " + std::to_string(desc_.window_h) + " stride " + std::to_string(desc_.stride_h) +
         (desc_.pad_h ? " pad " + std::to_string(desc_.pad_h) : "") + (ceil_mode_ ? " ceil" : "");
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
    y = Shape{x[0], pooled_length(x[1], desc_.window_h, desc_.stride_h, desc_.pad_h),
              pooled_length(x[2], desc_.window_w, desc_.stride_w, desc_.pad_w)};
  }
  out_elements_ = static_cast<double>(y.elements());
  return y;
}

// PyTorch's pooling_output_shape: floor, or with ceil_mode one more window where the stride
// leaves part of the input uncovered, unless that window would start in the right padding.
int Pool2D::pooled_length(int length, int window, int stride, int padding) const {
  const int floor_length = sliding_output(describe(), "window", length, window, stride, padding);
  if (!ceil_mode_) return floor_length;
  const std::int64_t rest = (std::int64_t{length} + 2 * std::int64_t{padding} - window) % stride;
  std::int64_t out = std::int64_t{floor_length} + (rest != 0 ? 1 : 0);
  if ((out - 1) * stride >= std::int64_t{length} + padding) --out;
  if (out > INT_MAX) throw ShapeError(describe() + ": an input of " + std::to_string(length) + " gives more than an int");
  return static_cast<int>(out);
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

// maxpool and avgpool: WINDOW [stride=S] [pad=P] [ceil=0|1], stride by default the window.
LayerType windowed_pool_type(PoolMode mode) {
  const bool max = mode == PoolMode::max;
  LayerType type;
  type.type_name = max ? "maxpool2d" : "avgpool2d";
  type.layer_class = &typeid(Pool2D);
  type.word = max ? "maxpool" : "avgpool";
  type.usage = type.word + " WINDOW [stride=S] [pad=P] [ceil=0|1]";
  type.options = {"stride", "pad", "ceil"};
  type.parse = [mode](LayerLine& line) {
    line.expect_arguments(1);
    const int window = line.whole_number(0);
    const int stride = line.whole_option("stride", 0);
    return std::make_unique<Pool2D>(mode, window, stride, line.whole_option("pad", 0), line.flag_option("ceil", false));
  };
  type.text = [](const Layer& layer, std::span<const std::string>) {
    const auto& pool = static_cast<const Pool2D&>(layer);
    const Pool2dDesc& d = pool.desc();
    std::string words = std::to_string(d.window_h);
    if (d.stride_h != d.window_h) words += " stride=" + std::to_string(d.stride_h);
    if (d.pad_h != 0) words += " pad=" + std::to_string(d.pad_h);
    if (pool.ceil_mode()) words += " ceil=1";
    return words;
  };
  // Ours average over the window's input elements alone, padding (and, in ceil mode, the part of
  // the last window past the input) left out of the count. ONNX's ceil_mode (opset 13) keeps a
  // last window that starts in the right padding, which PyTorch's drops: where that makes the
  // sizes differ, the windows are written as floor mode with the bottom and right padding that
  // gives ours (less than a window: the last starts inside the input).
  type.onnx = [max](const Layer& layer, OnnxNodes& graph) {
    const auto& pool = static_cast<const Pool2D&>(layer);
    const Pool2dDesc& d = pool.desc();
    const Shape x = graph.input_shape(0);
    const std::int64_t h = x[1], w = x[2];
    const std::int64_t out_h = pool.pooled_length(x[1], d.window_h, d.stride_h, d.pad_h);
    const std::int64_t out_w = pool.pooled_length(x[2], d.window_w, d.stride_w, d.pad_w);
    const auto onnx_ceil = [](std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t p) {
      return (in + 2 * p - k + s - 1) / s + 1;
    };
    const auto floor_length = [](std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t p) {
      return (in + 2 * p - k) / s + 1;
    };
    const bool same_as_floor = out_h == floor_length(h, d.window_h, d.stride_h, d.pad_h) &&
                               out_w == floor_length(w, d.window_w, d.stride_w, d.pad_w);
    const bool same_as_onnx_ceil = out_h == onnx_ceil(h, d.window_h, d.stride_h, d.pad_h) &&
                                   out_w == onnx_ceil(w, d.window_w, d.stride_w, d.pad_w);
    const bool ceil = pool.ceil_mode() && !same_as_floor && same_as_onnx_ceil;
    std::int64_t end_h = d.pad_h, end_w = d.pad_w;
    if (!same_as_floor && !ceil) {
      end_h = std::max<std::int64_t>(d.pad_h, (out_h - 1) * d.stride_h + d.window_h - h - d.pad_h);
      end_w = std::max<std::int64_t>(d.pad_w, (out_w - 1) * d.stride_w + d.window_w - w - d.pad_w);
    }
    OnnxNode& node = graph.add_output_node(max ? "MaxPool" : "AveragePool", {graph.input(0)})
                         .set_ints("kernel_shape", {d.window_h, d.window_w})
                         .set_ints("strides", {d.stride_h, d.stride_w})
                         .set_ints("pads", {d.pad_h, d.pad_w, end_h, end_w})
                         .set_int("ceil_mode", ceil ? 1 : 0);
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

std::unique_ptr<Layer> layers::max_pool2d(int window, int stride, int padding, bool ceil_mode) {
  return std::make_unique<Pool2D>(PoolMode::max, window, stride, padding, ceil_mode);
}

std::unique_ptr<Layer> layers::avg_pool2d(int window, int stride, int padding, bool ceil_mode) {
  return std::make_unique<Pool2D>(PoolMode::average, window, stride, padding, ceil_mode);
}

std::unique_ptr<Layer> layers::global_avg_pool2d() { return std::make_unique<Pool2D>(Pool2D::global_average()); }

LayerType global_max_pool_type() {
  LayerType type;
  type.type_name = "global_maxpool";
  type.layer_class = &typeid(Pool2D);
  type.word = type.usage = "globalmaxpool";
  type.parse = [](LayerLine& line) {
    line.expect_arguments(0);
    return std::make_unique<Pool2D>(Pool2D::global_max());
  };
  type.onnx = [](const Layer&, OnnxNodes& graph) { graph.add_output_node("GlobalMaxPool", {graph.input(0)}); };
  return type;
}

std::unique_ptr<Layer> layers::global_max_pool2d() { return std::make_unique<Pool2D>(Pool2D::global_max()); }

}  // namespace cnn
