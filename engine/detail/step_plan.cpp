#include "cnnengine/engine/detail/step_plan.hpp"

#include <algorithm>

#include "cnnengine/base/error.hpp"

namespace cnn {
namespace {

using memory::BufferRequest;
using memory::Category;

int add_request(StepPlan& p, std::string name, std::size_t bytes, int first, int last, Category category) {
  p.requests.push_back(BufferRequest{std::move(name), bytes, first, last, category});
  return static_cast<int>(p.requests.size()) - 1;
}

}  // namespace

StepPlan plan_step(Network& net, Backend& backend, int micro_batch, bool training, std::size_t workspace_limit) {
  if (micro_batch <= 0) throw ConfigError("plan_step: micro-batch must be positive");
  StepPlan p;
  p.training = training;
  p.micro_batch = micro_batch;
  p.last_node = net.last();
  const int L = net.last();
  const int logits = net.node(L).value;  // the buffer the loss reads (the last node may be a view)
  const std::size_t count = static_cast<std::size_t>(net.size());
  p.value.assign(count, -1);
  p.value_grad.assign(count, -1);
  p.saved.assign(count, {});
  p.forward_workspace.assign(count, -1);
  p.backward_workspace.assign(count, -1);
  p.accumulate.assign(count, {});
  p.discarded_input_grad.assign(count, -1);
  p.time_steps = training ? 2 * L + 2 : L + 2;
  const auto b = static_cast<std::size_t>(micro_batch);

  for (int id = 0; id < net.size(); ++id) {
    const Node& n = net.node(id);
    if (n.value != id) continue;  // a view: shares its input's buffer
    const std::vector<int> readers = net.readers_of_value(id);
    if (readers.empty() && id != logits)
      throw ShapeError("node " + n.name + ": its output is never used");
    int last = id == logits ? p.loss_time() : id;
    bool producer_needs_output = n.layer && n.layer->backward_needs_output();
    for (int r : readers) {
      last = std::max(last, p.forward_time(r));
      if (training && net.node(r).layer->backward_needs_input()) last = std::max(last, p.backward_time(r));
    }
    if (training && producer_needs_output) last = std::max(last, p.backward_time(id));
    const std::size_t bytes = n.shape.elements() * b * sizeof(float);
    p.value[static_cast<std::size_t>(id)] =
        add_request(p, id == 0 ? "input" : n.name, bytes, id == 0 ? 0 : p.forward_time(id), last,
                    id == 0 ? Category::data_staging : Category::activations);

    if (training && id != 0) {
      int first = id == logits ? p.loss_time() : p.time_steps;
      for (int r : readers) first = std::min(first, p.backward_time(r));
      p.value_grad[static_cast<std::size_t>(id)] =
          add_request(p, "grad " + n.name, bytes, first, p.backward_time(id), Category::activations);
    }
  }

  for (int id = 1; id < net.size(); ++id) {
    Node& n = net.node(id);
    if (n.layer->is_view()) continue;
    if (training) {
      const auto saved = n.layer->saved_floats(micro_batch);
      for (std::size_t k = 0; k < saved.size(); ++k)
        p.saved[static_cast<std::size_t>(id)].push_back(add_request(p, "saved " + n.name + "." + std::to_string(k),
                                                                    saved[k] * sizeof(float), p.forward_time(id),
                                                                    p.backward_time(id), Category::activations));
    }
    if (auto ws = n.layer->workspace_bytes(backend, micro_batch, ConvPass::forward, workspace_limit))
      p.forward_workspace[static_cast<std::size_t>(id)] =
          add_request(p, "workspace " + n.name, ws, p.forward_time(id), p.forward_time(id), Category::workspace);
    if (training)
      if (auto ws = n.layer->workspace_bytes(backend, micro_batch, ConvPass::backward, workspace_limit))
        p.backward_workspace[static_cast<std::size_t>(id)] = add_request(
            p, "workspace back " + n.name, ws, p.backward_time(id), p.backward_time(id), Category::workspace);

    // The reader that runs backward first (the latest in forward order) writes each input
    // gradient; the others add to it.
    auto& acc = p.accumulate[static_cast<std::size_t>(id)];
    acc.assign(n.inputs.size(), false);
    for (std::size_t k = 0; k < n.inputs.size(); ++k) {
      const int v = net.node(n.inputs[k]).value;
      for (int r = id + 1; r < net.size() && !acc[k]; ++r) {
        if (net.node(r).layer->is_view()) continue;
        for (int in : net.node(r).inputs) acc[k] = acc[k] || net.node(in).value == v;
      }
      for (std::size_t j = 0; j < k && !acc[k]; ++j) acc[k] = net.node(n.inputs[j]).value == v;
    }
    if (training && n.layer->backward_writes_input_gradient()) {
      std::size_t largest = 0;
      for (std::size_t k = 0; k < n.inputs.size(); ++k)
        if (p.value_grad[static_cast<std::size_t>(net.node(n.inputs[k]).value)] < 0) {
          largest = std::max(largest, net.node(n.inputs[k]).shape.elements() * b * sizeof(float));
          acc[k] = false;  // written, never added to
        }
      if (largest)
        p.discarded_input_grad[static_cast<std::size_t>(id)] = add_request(
            p, "discarded grad " + n.name, largest, p.backward_time(id), p.backward_time(id), Category::activations);
    }
  }
  p.labels = add_request(p, "labels", b * sizeof(std::int32_t), 0, p.loss_time(), Category::data_staging);
  p.plan = memory::plan_offsets(p.requests, memory::kDefaultAlignment);
  return p;
}

}  // namespace cnn
