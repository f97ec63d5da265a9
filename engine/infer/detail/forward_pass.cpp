#include "engine/infer/detail/forward_pass.hpp"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include <cnnengine/base/error.hpp>
#include "engine/core/detail/batch_checks.hpp"

namespace cnn {

ForwardPass::ForwardPass(Network& network, Backend& backend, const ParameterStore& params, const StepPlan& plan,
                         void* arena, ForwardSlots& slots, InputStager& input)
    : net_(network), backend_(backend), params_(params), plan_(plan), arena_(static_cast<char*>(arena)), slots_(slots),
      input_(input) {
  if (plan_.training) throw std::logic_error("ForwardPass: a training plan");
  std::size_t most_inputs = 0;
  for (int id = 1; id < net_.size(); ++id) most_inputs = std::max(most_inputs, net_.node(id).inputs.size());
  inputs_.reserve(most_inputs);
}

Tensor ForwardPass::buffer(int index, Shape shape) const {
  if (index < 0) return Tensor{};
  return Tensor{reinterpret_cast<float*>(arena_ + plan_.plan.offsets[static_cast<std::size_t>(index)]), shape};
}

Tensor ForwardPass::value(int node, int n) const {
  const Node& nd = net_.node(node);
  return buffer(plan_.node(nd.value).value, nd.shape.batched(n));
}

void ForwardPass::run(const Batch& batch, bool loss, float* logits) {
  const int n = batch.size;
  check_micro_batch(n, plan_.micro_batch);
  void* targets = arena_ + plan_.plan.offsets[static_cast<std::size_t>(plan_.labels)];
  // No dropout draws in inference: the seed is left at 0, the gradient scale too.
  const StepScalars scalars{0, static_cast<std::uint64_t>(batch.first), 0.0f};
  input_.stage(batch, scalars, value(0, n).data, targets, &slots_.scalars);

  // Note [A convolution and its ReLU in one pass] (step_plan.cpp): a convolution may run the ReLU
  // after it, whose buffer it shares.
  const int last = net_.last();
  for (int id = 1; id <= last; ++id) {
    const Node& nd = net_.node(id);
    if (nd.layer->is_view() || plan_.forward_runs_within(id)) continue;
    inputs_.clear();
    for (int in : nd.inputs) inputs_.push_back(value(in, n));
    LayerContext c;
    c.backend = &backend_;
    c.batch = n;
    c.training = false;
    c.step = &slots_.scalars;
    c.node = id;
    c.inputs = inputs_;
    c.output = value(id, n);
    c.params = params_.params(id);
    c.grads = params_.grads(id);
    if (const int w = plan_.node(id).forward_workspace; w >= 0)
      c.workspace = Workspace{arena_ + plan_.plan.offsets[static_cast<std::size_t>(w)],
                              plan_.requests[static_cast<std::size_t>(w)].bytes};
    if (plan_.relu_in_forward_of(id)) nd.layer->forward_then_relu(c);
    else nd.layer->forward(c);
  }
  const Tensor out = value(last, n);
  if (loss) {
    const LossOptions& options = net_.loss();
    const auto weight_count = static_cast<int>(loss_weight_floats(options));
    const Tensor weights = weight_count ? Tensor{loss_weights(&slots_), Shape{weight_count}} : Tensor{};
    const int w = plan_.loss_workspace;
    const Workspace ws = w >= 0 ? Workspace{arena_ + plan_.plan.offsets[static_cast<std::size_t>(w)],
                                            plan_.requests[static_cast<std::size_t>(w)].bytes}
                                : Workspace{};
    run_loss(backend_, options, out, targets, weights, Tensor{}, &slots_.scalars, &slots_.sums.loss, ws);
  }
  if (logits) backend_.copy_to_host(out.data, logits, out.bytes());
}

}  // namespace cnn
