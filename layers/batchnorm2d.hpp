#pragma once
#include <cnnengine/engine/core/layer.hpp>

namespace cnn {

struct LayerType;

// Batch normalisation per channel. In training, statistics come from the micro-batch being run
// (docs/design.md, "One training step"); running statistics are used for inference.
class BatchNorm2D final : public Layer {
 public:
  explicit BatchNorm2D(float momentum = 0.1f, float epsilon = 1e-5f);
  std::string type_name() const override { return "batchnorm2d"; }
  std::string describe() const override { return "batchnorm2d"; }
  Shape output_shape(const std::vector<Shape>& inputs) override;
  std::vector<ParamSpec> parameters() const override;
  std::vector<std::size_t> saved_floats(int) const override {
    return {static_cast<std::size_t>(channels_), static_cast<std::size_t>(channels_)};
  }
  bool backward_needs_input() const override { return true; }
  bool backward_writes_input_gradient() const override { return true; }
  bool packed_values() const override { return true; }
  bool takes_channels_last() const override { return true; }
  TrainingBatchNeed training_batch_need() const override;
  void forward(const LayerContext& c) override;
  void backward(const LayerContext& c) override;
  // In training, but for synchronised BatchNorm (which sums over the ranks between its calls).
  ReluAfter relu_after() const override { return ReluAfter::batchnorm; }
  void forward_then_relu(const LayerContext& c) override;
  void backward_through_relu(const LayerContext& c) override;
  void forward_then_add_relu(const LayerContext& c) override;
  void backward_through_add_relu(const LayerContext& c) override;
  float momentum() const { return momentum_; }
  float epsilon() const { return epsilon_; }
  // From the saved batch statistics: the running statistics move once per micro-batch, in forward.
  bool recomputable() const override { return true; }
  bool cheap_to_recompute() const override { return true; }
  void recompute(const LayerContext& c) override;
  LayerCost forward_cost() const override;
  // Two floats a channel: the sums synchronised BatchNorm adds up over the ranks in backward.
  std::size_t cross_rank_scratch_floats() const override { return 2 * static_cast<std::size_t>(channels_); }

 private:
  // A ConfigError where the micro-batch gives a channel one value: no batch variance.
  void check_training_batch(const LayerContext& c) const;
  double values_over_ranks(const LayerContext& c) const;
  void forward_over_ranks(const LayerContext& c);
  void backward_over_ranks(const LayerContext& c);

  float momentum_, epsilon_;
  int channels_ = 0;
  std::size_t values_per_channel_ = 0;  // per sample: H x W, or 1 after a dense layer
};

// "batchnorm [momentum=M] [eps=E]" in network text; BatchNormalization on the running statistics in ONNX.
LayerType batchnorm2d_type();

}  // namespace cnn
