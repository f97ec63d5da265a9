#pragma once
// Concatenation over channels (PyTorch's torch.cat(dim=1)): the channels of every input, in
// order, as one output.
#include <vector>

#include <cnnengine/engine/core/layer.hpp>

namespace cnn {

struct LayerType;

// Two or more inputs, all C x H x W of one H and W (or all flat: the features concatenated).
class Concat final : public Layer {
 public:
  std::string type_name() const override { return "concat"; }
  std::string describe() const override { return "concat"; }
  int input_count() const override { return 0; }
  Shape output_shape(const std::vector<Shape>& inputs) override;
  bool recomputable() const override { return true; }
  bool cheap_to_recompute() const override { return true; }
  LayerCost forward_cost() const override { return {0, 2 * sizeof(float) * elements_}; }
  void forward(const LayerContext& c) override;
  void backward(const LayerContext& c) override;
  std::size_t inputs() const { return channels_.size(); }

 private:
  std::vector<int> channels_;  // each input's channels (features, flat)
  double elements_ = 0;        // the output's, per sample
};

// "concat NAME [NAME...]" in network text (the previous output's channels, then each named
// one's); Concat over axis 1 in ONNX.
LayerType concat_type();

}  // namespace cnn
