#include "layers/pool2d.hpp"

#include <climits>
#include <cstdint>

namespace cnn {

Pool2D::Pool2D(PoolMode mode, int window, int stride, int padding) {
  if (window <= 0 || stride < 0 || padding < 0 || padding >= window)
    throw std::invalid_argument("pool2d: window must be positive and padding smaller than the window");
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

std::string Pool2D::kind() const {
  if (global_) return "global_avgpool";
  return desc_.mode == PoolMode::max ? "maxpool2d" : "avgpool2d";
}

std::string Pool2D::describe() const {
  if (global_) return kind();
  return kind() + " " + std::to_string(desc_.window_h) + " stride " + std::to_string(desc_.stride_h) +
         (desc_.pad_h ? " pad " + std::to_string(desc_.pad_h) : "");
}

Shape Pool2D::output_shape(const std::vector<Shape>& inputs) {
  const Shape& x = inputs.at(0);
  if (x.rank != 3) throw ShapeError(describe() + ": needs a CxHxW input, got " + x.str());
  if (global_) {
    desc_.window_h = desc_.stride_h = x[1];
    desc_.window_w = desc_.stride_w = x[2];
    return Shape{x[0], 1, 1};
  }
  // In 64 bits: twice a large padding overflows an int.
  const std::int64_t padded_h = std::int64_t{x[1]} + 2 * std::int64_t{desc_.pad_h};
  const std::int64_t padded_w = std::int64_t{x[2]} + 2 * std::int64_t{desc_.pad_w};
  if (padded_h < desc_.window_h || padded_w < desc_.window_w)
    throw ShapeError(describe() + ": input " + x.str() + " is smaller than the window");
  const std::int64_t h = (padded_h - desc_.window_h) / desc_.stride_h + 1;
  const std::int64_t w = (padded_w - desc_.window_w) / desc_.stride_w + 1;
  if (h > INT_MAX || w > INT_MAX)
    throw ShapeError(describe() + ": input " + x.str() + " gives an output of " + std::to_string(h) + "x" +
                     std::to_string(w) + ", more than " + std::to_string(INT_MAX) + " a side");
  return Shape{x[0], static_cast<int>(h), static_cast<int>(w)};
}

void Pool2D::backward(const LayerContext& c) {
  if (wants_gradient(c, 0))
    c.backend->pool2d_backward(desc_, c.inputs[0], c.output, c.grad_output, c.grad_inputs[0], c.accumulate[0]);
}

}  // namespace cnn
