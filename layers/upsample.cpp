// Upsampling's shapes and type; in ONNX, a Resize by [1, 1, F, F].
#include <cnnengine/engine/core/backend.hpp>
#include "layers/upsample.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>

#include <cnnengine/layers/builtin_layers.hpp>
#include <cnnengine/layers/registry.hpp>

namespace cnn {
namespace {

const char* mode_word(UpsampleMode mode) { return mode == UpsampleMode::nearest ? "nearest" : "bilinear"; }

}  // namespace

Upsample::Upsample(int factor, UpsampleMode mode) {
  if (factor < 1) throw ConfigError("upsample: the factor must be a whole number >= 1, got " + std::to_string(factor));
  desc_.factor = factor;
  desc_.mode = mode;
}

std::string Upsample::describe() const {
  return "upsample x" + std::to_string(desc_.factor) + " " + mode_word(desc_.mode);
}

Shape Upsample::output_shape(const std::vector<Shape>& inputs) {
  const Shape& x = inputs.at(0);
  if (x.rank != 3) throw ShapeError(describe() + ": needs a CxHxW input, got " + x.str());
  const long long h = static_cast<long long>(x[1]) * desc_.factor, w = static_cast<long long>(x[2]) * desc_.factor;
  if (h > INT_MAX || w > INT_MAX)
    throw ShapeError(describe() + ": " + x.str() + " upsampled is larger than an int holds");
  in_elements_ = static_cast<double>(x.elements());
  const Shape y{x[0], static_cast<int>(h), static_cast<int>(w)};
  out_elements_ = static_cast<double>(y.elements());
  return y;
}

LayerCost Upsample::forward_cost() const {
  const double per_output = desc_.mode == UpsampleMode::nearest ? 0.0 : 6.0;  // two lerps per axis
  return {per_output * out_elements_, sizeof(float) * (in_elements_ + out_elements_)};
}

LayerType upsample_type() {
  LayerType type;
  type.type_name = "upsample";
  type.layer_class = &typeid(Upsample);
  type.word = "upsample";
  type.usage = "upsample FACTOR [mode=nearest|bilinear]";
  type.options = {"mode"};
  type.parse = [](LayerLine& line) {
    line.expect_arguments(1);
    const std::string mode = line.text_option("mode", "nearest");
    if (mode != "nearest" && mode != "bilinear")
      throw ConfigError("upsample: mode '" + mode + "' is not one of nearest, bilinear");
    return std::make_unique<Upsample>(line.whole_number(0),
                                      mode == "nearest" ? UpsampleMode::nearest : UpsampleMode::bilinear);
  };
  type.text = [](const Layer& layer, std::span<const std::string>) {
    const UpsampleDesc& d = static_cast<const Upsample&>(layer).desc();
    return std::to_string(d.factor) + (d.mode == UpsampleMode::bilinear ? " mode=bilinear" : "");
  };
  type.onnx = [](const Layer& layer, OnnxNodes& graph) {
    const UpsampleDesc& d = static_cast<const Upsample&>(layer).desc();
    const auto f = static_cast<float>(d.factor);
    const std::string scales = graph.float_constant("scales", {1.0f, 1.0f, f, f}, {4});
    // Resize's defaults (half_pixel, round_prefer_floor) pick floor(x / F) for a whole factor:
    // PyTorch's nearest. Bilinear with half_pixel is PyTorch's align_corners=False.
    if (d.mode == UpsampleMode::nearest) {
      graph.add_output_node("Resize", {graph.input(0), "", scales});
    } else {
      graph.add_output_node("Resize", {graph.input(0), "", scales})
          .set_string("mode", "linear")
          .set_string("coordinate_transformation_mode", "half_pixel");
    }
  };
  return type;
}

std::unique_ptr<Layer> layers::upsample(int factor, UpsampleMode mode) { return std::make_unique<Upsample>(factor, mode); }

}  // namespace cnn
