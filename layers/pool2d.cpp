#include "layers/pool2d.hpp"

#include "base/error.hpp"

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

LayerKind Pool2D::kind() const {
  if (global_) return LayerKind::global_average_pool;
  return desc_.mode == PoolMode::max ? LayerKind::max_pool2d : LayerKind::average_pool2d;
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
