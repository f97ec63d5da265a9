#pragma once
#include <cnnengine/engine/core/layer.hpp>

namespace cnn {

struct LayerType;

// Inverted dropout: in training each element is kept with probability 1-p and scaled by 1/(1-p);
// in inference the layer passes its input through.
class Dropout final : public Layer {
 public:
  explicit Dropout(float p);
  std::string type_name() const override { return "dropout"; }
  std::string describe() const override { return "dropout " + std::to_string(p_).substr(0, 4); }
  Shape output_shape(const std::vector<Shape>& inputs) override {
    sample_ = inputs.at(0).elements();
    return inputs.at(0);
  }
  std::vector<std::size_t> saved_floats(int batch) const override { return {sample_ * static_cast<std::size_t>(batch)}; }
  // The mask is drawn again from its key (the step's seed, the layer, the sample's place).
  bool recomputable() const override { return true; }
  bool cheap_to_recompute() const override { return true; }
  bool recompute_rewrites_saved() const override { return true; }
  bool runs_in_place() const override { return true; }
  LayerCost forward_cost() const override {
    const auto n = static_cast<double>(sample_);
    return {2 * n, 3 * sizeof(float) * n};
  }
  void forward(const LayerContext& c) override;
  void backward(const LayerContext& c) override;
  float p() const { return p_; }

 private:
  float p_;
  std::size_t sample_ = 0;
};

// "dropout P" in network text; nothing in ONNX (inference passes the input through).
LayerType dropout_type();

}  // namespace cnn
