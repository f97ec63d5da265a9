#pragma once
// Every buffer one step touches (input and label slots, activations, their gradients, what
// layers save for backward, layer workspaces) with the time steps it is live, and their offsets
// in the step arena. Time runs: 0 input copy, i forward of node i (1..L), L+1 loss,
// 2L+2-i backward of node i.
#include <vector>

#include "cnnengine/engine/network.hpp"
#include "cnnengine/memory/detail/planner.hpp"

namespace cnn {

// One node's buffers: indices into StepPlan::requests, -1 where there is none.
struct NodeBuffers {
  int value = -1;       // the node's output (a view has none: it is its input's)
  int value_grad = -1;  // the output's gradient (training)
  std::vector<int> saved;  // what the layer keeps from forward to backward, in saved_floats() order
  int forward_workspace = -1;
  int backward_workspace = -1;
  // Per input: backward adds to that input's gradient instead of writing it (another reader,
  // run backward earlier, wrote it first).
  std::vector<bool> accumulate;
  // Where the layer writes an input gradient nothing reads (the network input's): a buffer live
  // during its backward only (Layer::backward_writes_input_gradient).
  int discarded_input_grad = -1;
};

struct StepPlan {
  bool training = true;
  int micro_batch = 0;
  int time_steps = 0;  // times run from 0 to time_steps-1
  int last_node = 0;
  std::vector<memory::BufferRequest> requests;
  memory::Plan plan;
  std::vector<NodeBuffers> nodes;  // by node id
  int labels = -1;

  int forward_time(int node) const { return node; }
  int loss_time() const { return last_node + 1; }
  int backward_time(int node) const { return 2 * last_node + 2 - node; }
  std::size_t arena_bytes() const { return plan.arena_bytes; }
  const NodeBuffers& node(int id) const { return nodes[static_cast<std::size_t>(id)]; }
};

// Throws ShapeError if a node's output is never read. workspace_limit bounds what one layer's
// workspace may take (the backend picks the fastest method within it).
StepPlan plan_step(Network& network, Backend& backend, int micro_batch, bool training,
                   std::size_t workspace_limit);

}  // namespace cnn
