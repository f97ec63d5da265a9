#pragma once
#include <climits>

#include <cnnengine/engine/core/layer.hpp>

namespace cnn {

struct LayerType;

// CxHxW -> C*H*W. A view: the engine aliases its output to its input and never runs it. Its input
// in channels-last order flattens alike only where the image has one pixel or one channel.
class Flatten final : public Layer {
 public:
  std::string type_name() const override { return "flatten"; }
  std::string describe() const override { return "flatten"; }
  Shape output_shape(const std::vector<Shape>& inputs) override {
    const std::size_t elements = inputs.at(0).elements();
    if (elements > static_cast<std::size_t>(INT_MAX))
      throw ShapeError("flatten: " + inputs.at(0).str() + " holds " + std::to_string(elements) + " elements, more than " +
                       std::to_string(INT_MAX));
    in_ = inputs.at(0);
    return Shape{static_cast<int>(elements)};
  }
  bool is_view() const override { return true; }
  bool takes_channels_last() const override { return one_order(in_); }
  void forward(const LayerContext&) override {}
  void backward(const LayerContext&) override {}

 private:
  Shape in_;  // per sample
};

// "flatten" in network text; Flatten in ONNX (nothing where the input is a vector already).
LayerType flatten_type();

}  // namespace cnn
