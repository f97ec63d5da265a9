// Padding's shapes and type; in ONNX, a Pad of [0, 0, top, left, 0, 0, bottom, right].
#include "layers/pad.hpp"

#include <climits>
#include <cmath>
#include <cstdint>

#include <cnnengine/layers/builtin_layers.hpp>
#include <cnnengine/layers/registry.hpp>

namespace cnn {
namespace {

// "1, 2, 0, 3" (left, right, top, bottom, PyTorch's order)
std::string sides(const PadDesc& d) {
  return std::to_string(d.left) + ", " + std::to_string(d.right) + ", " + std::to_string(d.top) + ", " +
         std::to_string(d.bottom);
}

}  // namespace

Pad::Pad(const PadDesc& desc) : desc_(desc) {
  for (int side : {desc.left, desc.right, desc.top, desc.bottom})
    if (side < 0 || side > kMaxPad)
      throw ConfigError("pad: each side's padding must be from 0 to " + std::to_string(kMaxPad) + ", got " +
                        sides(desc) + " (left, right, top, bottom)");
  if (std::isnan(desc.value)) throw ConfigError("pad: the value must be a number (or -inf), not NaN");
}

std::string Pad::describe() const {
  std::string text = "pad " + sides(desc_);
  if (desc_.value != 0.0f) text += " value " + exact_text(desc_.value);
  return text;
}

Shape Pad::output_shape(const std::vector<Shape>& inputs) {
  const Shape& x = inputs.at(0);
  if (x.rank != 3) throw ShapeError(describe() + ": needs a CxHxW input, got " + x.str());
  const long long h = static_cast<long long>(x[1]) + desc_.top + desc_.bottom;
  const long long w = static_cast<long long>(x[2]) + desc_.left + desc_.right;
  if (h > INT_MAX || w > INT_MAX) throw ShapeError(describe() + ": " + x.str() + " padded is larger than an int holds");
  in_elements_ = static_cast<double>(x.elements());
  const Shape y{x[0], static_cast<int>(h), static_cast<int>(w)};
  out_elements_ = static_cast<double>(y.elements());
  return y;
}

LayerCost Pad::forward_cost() const { return {0.0, sizeof(float) * (in_elements_ + out_elements_)}; }

LayerType pad_type() {
  LayerType type;
  type.type_name = "pad";
  type.layer_class = &typeid(Pad);
  type.word = "pad";
  type.usage = "pad P | pad LEFT RIGHT TOP BOTTOM [value=V]";
  type.options = {"value"};
  type.parse = [](LayerLine& line) {
    PadDesc d;
    if (line.argument_count() == 1) {
      d.left = d.right = d.top = d.bottom = line.whole_number(0);
    } else {
      line.expect_arguments(4);
      d.left = line.whole_number(0);
      d.right = line.whole_number(1);
      d.top = line.whole_number(2);
      d.bottom = line.whole_number(3);
    }
    d.value = line.real_option("value", 0.0f);
    return std::make_unique<Pad>(d);
  };
  type.text = [](const Layer& layer, std::span<const std::string>) {
    const PadDesc& d = static_cast<const Pad&>(layer).desc();
    const bool even = d.left == d.right && d.left == d.top && d.left == d.bottom;
    std::string text = even ? std::to_string(d.left)
                            : std::to_string(d.left) + " " + std::to_string(d.right) + " " + std::to_string(d.top) +
                                  " " + std::to_string(d.bottom);
    if (d.value != 0.0f) text += " value=" + exact_text(d.value);
    return text;
  };
  type.onnx = [](const Layer& layer, OnnxNodes& graph) {
    const PadDesc& d = static_cast<const Pad&>(layer).desc();
    const std::string pads = graph.int_constant("pads", {0, 0, d.top, d.left, 0, 0, d.bottom, d.right}, {8});
    const std::string value = graph.float_constant("value", {d.value}, {});
    graph.add_output_node("Pad", {graph.input(0), pads, value}).set_string("mode", "constant");
  };
  return type;
}

std::unique_ptr<Layer> layers::pad(int left, int right, int top, int bottom, float value) {
  return std::make_unique<Pad>(PadDesc{top, bottom, left, right, value});
}

}  // namespace cnn
