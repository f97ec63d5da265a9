// Group and layer normalisation: the layer, and its two types (network text and ONNX nodes).
#include <cnnengine/engine/core/backend.hpp>
#include "layers/group_norm.hpp"

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <cnnengine/base/error.hpp>
#include <cnnengine/layers/builtin_layers.hpp>
#include <cnnengine/layers/registry.hpp>

namespace cnn {

GroupNorm::GroupNorm(int groups, float epsilon) : GroupNorm(groups, epsilon, false) {}

GroupNorm GroupNorm::layer_norm(float epsilon) { return GroupNorm(1, epsilon, true); }

GroupNorm::GroupNorm(int groups, float epsilon, bool per_element)
    : groups_(groups), epsilon_(epsilon), per_element_(per_element) {
  if (groups <= 0)
    throw ConfigError(type_name() + ": the number of groups must be positive, got " + std::to_string(groups));
  if (!(epsilon > 0.f) || !std::isfinite(epsilon))
    throw ConfigError(type_name() + ": eps must be positive and finite, got " + exact_text(epsilon));
}

std::string GroupNorm::describe() const {
  std::string text = per_element_ ? "layer_norm" : "group_norm " + std::to_string(groups_);
  if (epsilon_ != 1e-5f) text += " eps " + exact_text(epsilon_);
  return text;
}

Shape GroupNorm::output_shape(const std::vector<Shape>& inputs) {
  const Shape& x = inputs.at(0);
  if (x.rank != 3 && x.rank != 1) throw ShapeError(describe() + ": needs a CxHxW or C input, got " + x.str());
  if (x[0] % groups_ != 0)
    throw ShapeError(describe() + ": " + std::to_string(groups_) + " groups do not divide the " + std::to_string(x[0]) +
                     " channels of input " + x.str());
  shape_ = x;
  return x;
}

std::vector<ParamSpec> GroupNorm::parameters() const {
  const int channels = shape_[0];
  const Shape affine = per_element_ ? shape_ : Shape{channels};
  return {{"gamma", affine, Init::ones, channels, channels, true},
          {"beta", affine, Init::zeros, channels, channels, true}};
}

std::size_t GroupNorm::workspace_bytes(Backend& backend, int batch, ConvPass pass, std::size_t) {
  return pass == ConvPass::backward ? backend.group_norm_workspace_bytes(desc(), shape_.batched(batch)) : 0;
}

void GroupNorm::forward(const LayerContext& c) {
  // Inference keeps no statistics: the plan gives no saved buffers, and the backend writes none.
  Tensor mean, inv_std;
  if (c.saved.size() == 2) {
    const Shape per_group{c.batch * groups_};
    mean = Tensor{c.saved[0].data, per_group};
    inv_std = Tensor{c.saved[1].data, per_group};
  } else if (c.training) {
    throw std::logic_error(describe() + ": training forward without buffers for the statistics");
  }
  c.backend->group_norm_forward(desc(), c.inputs[0], c.params[0], c.params[1], c.output, mean, inv_std);
}

void GroupNorm::backward(const LayerContext& c) {
  const Shape per_group{c.batch * groups_};
  if (c.saved.size() != 2) throw std::logic_error(describe() + ": backward without the saved statistics");
  const Tensor mean{c.saved[0].data, per_group}, inv_std{c.saved[1].data, per_group};
  const bool want_dx = wants_gradient(c, 0);
  c.backend->group_norm_backward(desc(), c.inputs[0], c.grad_output, c.params[0], mean, inv_std,
                                 want_dx ? c.grad_inputs[0] : Tensor{}, want_dx && c.accumulate[0], c.grads[0],
                                 c.grads[1], c.workspace);
}

LayerCost GroupNorm::forward_cost() const {
  // The statistics read x twice (in cache per group), y reads it once more and is written; a
  // per-element affine reads gamma and beta as well.
  const double n = static_cast<double>(shape_.elements());
  return {7 * n, (per_element_ ? 4 : 2) * sizeof(float) * n};
}

}  // namespace cnn

namespace cnn {
namespace {

std::string eps_text(const GroupNorm& layer) {
  return layer.epsilon() != 1e-5f ? "eps=" + exact_text(layer.epsilon()) : "";
}

// InstanceNormalization normalises each (sample, channel) over the rest: with the groups as its
// channels ([N, groups, -1]), each group over its channels, H and W. Its own scale and bias are
// ones and zeros; gamma and beta follow as Mul and Add (per channel: reshaped to [C, 1, 1] to
// broadcast over H and W).
void write_onnx(const GroupNorm& layer, OnnxNodes& graph) {
  const Shape x = graph.input_shape(0);
  const int groups = layer.groups(), channels = x[0];
  const std::string name = graph.name();
  const Shape grouped_shape{groups, static_cast<int>(x.elements() / static_cast<std::size_t>(groups))};
  graph.add_inner_node("Reshape", {graph.input(0), graph.int_constant("grouped_shape", {0, groups, -1}, {3})},
                       name + "_grouped", grouped_shape);
  const std::string ones =
      graph.float_constant("ones", std::vector<float>(static_cast<std::size_t>(groups), 1.f), {groups});
  const std::string zeros =
      graph.float_constant("zeros", std::vector<float>(static_cast<std::size_t>(groups), 0.f), {groups});
  graph.add_inner_node("InstanceNormalization", {name + "_grouped", ones, zeros}, name + "_normalised", grouped_shape)
      .set_float("epsilon", layer.epsilon());
  std::vector<std::int64_t> dims{0};
  for (int i = 0; i < x.rank; ++i) dims.push_back(x[i]);
  graph.add_inner_node(
      "Reshape", {name + "_normalised", graph.int_constant("shape", dims, {static_cast<std::int64_t>(dims.size())})},
      name + "_unscaled", x);
  std::string gamma = graph.parameter(0, "gamma"), beta = graph.parameter(1, "beta");
  if (!layer.is_layer_norm() && x.rank == 3) {
    // Values of no batch dimension: no shape given (the graph's shapes all have one in front).
    const std::string per_channel = graph.int_constant("channel_shape", {channels, 1, 1}, {3});
    graph.add_inner_node("Reshape", {gamma, per_channel}, name + "_gamma_channels", Shape{});
    graph.add_inner_node("Reshape", {beta, per_channel}, name + "_beta_channels", Shape{});
    gamma = name + "_gamma_channels";
    beta = name + "_beta_channels";
  }
  graph.add_inner_node("Mul", {name + "_unscaled", gamma}, name + "_scaled", x);
  graph.add_output_node("Add", {name + "_scaled", beta});
}

}  // namespace

LayerType group_norm_type() {
  LayerType type;
  type.type_name = "group_norm";
  type.layer_class = &typeid(GroupNorm);
  type.word = "groupnorm";
  type.usage = "groupnorm GROUPS [eps=E]";
  type.options = {"eps"};
  type.parse = [](LayerLine& line) {
    line.expect_arguments(1);
    const int groups = line.whole_number(0);
    return std::make_unique<GroupNorm>(groups, line.real_option("eps", 1e-5f));
  };
  type.text = [](const Layer& layer, std::span<const std::string>) {
    const auto& norm = static_cast<const GroupNorm&>(layer);
    const std::string eps = eps_text(norm);
    return std::to_string(norm.groups()) + (eps.empty() ? "" : " " + eps);
  };
  type.onnx = [](const Layer& layer, OnnxNodes& graph) { write_onnx(static_cast<const GroupNorm&>(layer), graph); };
  return type;
}

LayerType layer_norm_type() {
  LayerType type;
  type.type_name = "layer_norm";
  type.layer_class = &typeid(GroupNorm);
  type.word = "layernorm";
  type.usage = "layernorm [eps=E]";
  type.options = {"eps"};
  type.parse = [](LayerLine& line) {
    line.expect_arguments(0);
    return std::make_unique<GroupNorm>(GroupNorm::layer_norm(line.real_option("eps", 1e-5f)));
  };
  type.text = [](const Layer& layer, std::span<const std::string>) {
    return eps_text(static_cast<const GroupNorm&>(layer));
  };
  type.onnx = [](const Layer& layer, OnnxNodes& graph) { write_onnx(static_cast<const GroupNorm&>(layer), graph); };
  return type;
}

std::unique_ptr<Layer> layers::group_norm(int groups, float epsilon) {
  return std::make_unique<GroupNorm>(groups, epsilon);
}

std::unique_ptr<Layer> layers::layer_norm(float epsilon) {
  return std::make_unique<GroupNorm>(GroupNorm::layer_norm(epsilon));
}

}  // namespace cnn
