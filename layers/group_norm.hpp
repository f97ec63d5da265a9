#pragma once
// Group and layer normalisation: statistics from each sample alone, so any micro-batch will do.
#include <cnnengine/engine/core/backend.hpp>
#include <cnnengine/engine/core/layer.hpp>

namespace cnn {

struct LayerType;

// PyTorch's GroupNorm(groups, C): each sample's channels in `groups` groups, each group normalised
// over its channels, H and W (biased variance), then gamma and beta per channel. LayerNorm([C, H,
// W]) is the same with one group and gamma and beta per element (layer_norm()). Takes C x H x W or
// a flat C (no spatial dimensions).
class GroupNorm final : public Layer {
 public:
  explicit GroupNorm(int groups, float epsilon = 1e-5f);
  static GroupNorm layer_norm(float epsilon = 1e-5f);

  std::string type_name() const override { return per_element_ ? "layer_norm" : "group_norm"; }
  std::string describe() const override;
  Shape output_shape(const std::vector<Shape>& inputs) override;
  std::vector<ParamSpec> parameters() const override;
  // Each sample's groups' mean and 1 / sqrt(var + eps).
  std::vector<std::size_t> saved_floats(int batch) const override {
    const auto n = static_cast<std::size_t>(batch) * static_cast<std::size_t>(groups_);
    return {n, n};
  }
  // Backward's scratch sums (the backend's group_norm_workspace_bytes); forward needs none.
  std::size_t workspace_bytes(Backend& backend, int batch, ConvPass pass, std::size_t limit) override;
  bool backward_needs_input() const override { return true; }
  void forward(const LayerContext& c) override;
  void backward(const LayerContext& c) override;

  // The recomputation is forward again: the same statistics to the bit, written over forward's.
  // Not declared as rewriting them (recompute_rewrites_saved): keeping 2 x N x groups floats is
  // cheaper than the planner recomputing the output once more before this layer's own backward.
  bool recomputable() const override { return true; }
  bool cheap_to_recompute() const override { return true; }
  LayerCost forward_cost() const override;

  int groups() const { return groups_; }
  float epsilon() const { return epsilon_; }
  bool is_layer_norm() const { return per_element_; }
  GroupNormDesc desc() const { return {groups_, epsilon_, per_element_}; }

 private:
  GroupNorm(int groups, float epsilon, bool per_element);

  int groups_;
  float epsilon_;
  bool per_element_;
  Shape shape_;  // per sample
};

// "groupnorm GROUPS [eps=E]" and "layernorm [eps=E]" in network text. ONNX (opset 13 has neither):
// InstanceNormalization over the groups (a Reshape to [N, groups, -1] and back), then Mul and Add
// by gamma and beta.
LayerType group_norm_type();
LayerType layer_norm_type();

}  // namespace cnn
