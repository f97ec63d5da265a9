// Concatenation over channels: each input copied into its range of the output's channels, and
// each input's gradient copied back out of that range.
#include <cnnengine/engine/core/backend.hpp>
#include "layers/concat.hpp"

#include <climits>

#include <cnnengine/layers/builtin_layers.hpp>
#include <cnnengine/layers/registry.hpp>

namespace cnn {

Shape Concat::output_shape(const std::vector<Shape>& inputs) {
  if (inputs.size() < 2)
    throw ShapeError("concat: needs two or more inputs, got " + std::to_string(inputs.size()));
  const Shape& first = inputs[0];
  if (first.rank != 3 && first.rank != 1)
    throw ShapeError("concat: needs CxHxW or flat inputs, got " + first.str());
  channels_.clear();
  long long total = 0;
  for (const Shape& s : inputs) {
    const bool fits = s.rank == first.rank && (s.rank == 1 || (s[1] == first[1] && s[2] == first[2]));
    if (!fits)
      throw ShapeError("concat: inputs " + first.str() + " and " + s.str() +
                       (first.rank == 3 ? " differ in height, width or rank" : " differ in rank"));
    channels_.push_back(s[0]);
    total += s[0];
  }
  if (total > INT_MAX) throw ShapeError("concat: " + std::to_string(total) + " channels, more than an int holds");
  Shape y = first;
  y[0] = static_cast<int>(total);
  elements_ = static_cast<double>(y.elements());
  return y;
}

void Concat::forward(const LayerContext& c) {
  int offset = 0;
  for (std::size_t i = 0; i < channels_.size(); ++i) {
    c.backend->copy_channels(c.inputs[i], 0, c.output, offset, channels_[i], false);
    offset += channels_[i];
  }
}

void Concat::backward(const LayerContext& c) {
  int offset = 0;
  for (std::size_t i = 0; i < channels_.size(); ++i) {
    if (wants_gradient(c, i))
      c.backend->copy_channels(c.grad_output, offset, c.grad_inputs[i], 0, channels_[i], c.accumulate[i]);
    offset += channels_[i];
  }
}

LayerType concat_type() {
  LayerType type;
  type.type_name = "concat";
  type.layer_class = &typeid(Concat);
  type.word = "concat";
  type.usage = "concat NAME [NAME...]";
  type.parse = [](LayerLine& line) {
    if (line.argument_count() == 0) line.expect_arguments(1);  // "expected: <usage>"
    for (std::size_t i = 0; i < line.argument_count(); ++i) line.read_named_output(i);
    return std::make_unique<Concat>();
  };
  type.text = [](const Layer&, std::span<const std::string> input_names) {
    std::string words;
    for (std::size_t i = 1; i < input_names.size(); ++i) words += (i > 1 ? " " : "") + input_names[i];
    return words;
  };
  type.onnx = [](const Layer& layer, OnnxNodes& graph) {
    std::vector<std::string> inputs;
    const std::size_t count = static_cast<const Concat&>(layer).inputs();
    for (std::size_t i = 0; i < count; ++i) inputs.push_back(graph.input(i));
    graph.add_output_node("Concat", inputs).set_int("axis", 1);
  };
  return type;
}

std::unique_ptr<Layer> layers::concat() { return std::make_unique<Concat>(); }

}  // namespace cnn
