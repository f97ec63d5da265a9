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

// Each value's output buffer and its gradient, live from the producer's forward to the last use.
void plan_values(StepPlan& p, const Network& net, const std::vector<std::vector<int>>& readers) {
  const int logits = net.node(net.last()).value;  // the buffer the loss reads (the last node may be a view)
  const auto b = static_cast<std::size_t>(p.micro_batch);
  for (int id = 0; id < net.size(); ++id) {
    const Node& n = net.node(id);
    if (n.value != id) continue;  // a view: shares its input's buffer
    const std::vector<int>& read_by = readers[static_cast<std::size_t>(id)];
    if (read_by.empty() && id != logits) throw ShapeError("node " + n.name + ": its output is never used");
    int last = id == logits ? p.loss_time() : id;
    for (int r : read_by) {
      last = std::max(last, p.forward_time(r));
      if (p.training && net.node(r).layer->backward_needs_input()) last = std::max(last, p.backward_time(r));
    }
    if (p.training && n.layer && n.layer->backward_needs_output()) last = std::max(last, p.backward_time(id));
    const std::size_t bytes = n.shape.elements() * b * sizeof(float);
    NodeBuffers& buffers = p.nodes[static_cast<std::size_t>(id)];
    buffers.value = add_request(p, id == 0 ? "input" : n.name, bytes, id == 0 ? 0 : p.forward_time(id), last,
                                id == 0 ? Category::data_staging : Category::activations);
    if (p.training && id != 0) {
      int first = id == logits ? p.loss_time() : p.time_steps;
      for (int r : read_by) first = std::min(first, p.backward_time(r));
      buffers.value_grad = add_request(p, "grad " + n.name, bytes, first, p.backward_time(id), Category::activations);
    }
  }
}

// What one layer keeps for backward, its workspaces, and how it writes its input gradients.
void plan_layer(StepPlan& p, Network& net, Backend& backend, std::size_t workspace_limit, int id,
                const std::vector<std::vector<int>>& readers) {
  Node& n = net.node(id);
  NodeBuffers& buffers = p.nodes[static_cast<std::size_t>(id)];
  if (p.training) {
    const auto saved = n.layer->saved_floats(p.micro_batch);
    for (std::size_t k = 0; k < saved.size(); ++k)
      buffers.saved.push_back(add_request(p, "saved " + n.name + "." + std::to_string(k), saved[k] * sizeof(float),
                                          p.forward_time(id), p.backward_time(id), Category::activations));
  }
  if (auto ws = n.layer->workspace_bytes(backend, p.micro_batch, ConvPass::forward, workspace_limit))
    buffers.forward_workspace =
        add_request(p, "workspace " + n.name, ws, p.forward_time(id), p.forward_time(id), Category::workspace);
  if (p.training)
    if (auto ws = n.layer->workspace_bytes(backend, p.micro_batch, ConvPass::backward, workspace_limit))
      buffers.backward_workspace = add_request(p, "workspace back " + n.name, ws, p.backward_time(id),
                                               p.backward_time(id), Category::workspace);

  // The reader that runs backward first (the latest in forward order) writes each input
  // gradient; the others, and a second use of the same input by this layer, add to it.
  auto& acc = buffers.accumulate;
  acc.assign(n.inputs.size(), false);
  for (std::size_t k = 0; k < n.inputs.size(); ++k) {
    const int v = net.node(n.inputs[k]).value;
    acc[k] = readers[static_cast<std::size_t>(v)].back() > id;
    for (std::size_t j = 0; j < k && !acc[k]; ++j) acc[k] = net.node(n.inputs[j]).value == v;
  }
  if (p.training && n.layer->backward_writes_input_gradient()) {
    std::size_t largest = 0;
    for (std::size_t k = 0; k < n.inputs.size(); ++k)
      if (p.node(net.node(n.inputs[k]).value).value_grad < 0) {
        largest = std::max(largest, net.node(n.inputs[k]).shape.elements() * static_cast<std::size_t>(p.micro_batch) *
                                        sizeof(float));
        acc[k] = false;  // written, never added to
      }
    if (largest)
      buffers.discarded_input_grad = add_request(p, "discarded grad " + n.name, largest, p.backward_time(id),
                                                 p.backward_time(id), Category::activations);
  }
}

}  // namespace

StepPlan plan_step(Network& net, Backend& backend, int micro_batch, bool training, std::size_t workspace_limit) {
  if (micro_batch <= 0) throw ConfigError("plan_step: micro-batch must be positive");
  StepPlan p;
  p.training = training;
  p.micro_batch = micro_batch;
  p.last_node = net.last();
  p.time_steps = training ? 2 * p.last_node + 2 : p.last_node + 2;
  p.nodes.assign(static_cast<std::size_t>(net.size()), NodeBuffers{});
  const std::vector<std::vector<int>> readers = net.value_readers();
  plan_values(p, net, readers);
  for (int id = 1; id < net.size(); ++id)
    if (!net.node(id).layer->is_view()) plan_layer(p, net, backend, workspace_limit, id, readers);
  p.labels = add_request(p, "labels", static_cast<std::size_t>(micro_batch) * sizeof(std::int32_t), 0, p.loss_time(),
                         Category::data_staging);
  p.plan = memory::plan_offsets(p.requests, memory::kDefaultAlignment);
  return p;
}

}  // namespace cnn
