#pragma once
// Every buffer one step touches (input and label slots, activations, their gradients, what
// layers save for backward, layer workspaces) with the time steps it is live, and their offsets
// in the step arena. Time runs: 0 input copy, i forward of node i (1..L), L+1 loss,
// 2L+2-i backward of node i.
#include <vector>

#include "cnnengine/engine/network.hpp"
#include "cnnengine/memory/detail/planner.hpp"

namespace cnn {

struct StepPlan {
  bool training = true;
  int micro_batch = 0;
  int time_steps = 0;  // times run from 0 to time_steps-1
  std::vector<memory::BufferRequest> requests;
  memory::Plan plan;

  // Indices into `requests`; -1 where there is none. Indexed by node id.
  std::vector<int> value;       // the buffer holding a node's output (for its value id)
  std::vector<int> value_grad;  // its gradient (training)
  std::vector<std::vector<int>> saved;
  std::vector<int> forward_workspace, backward_workspace;
  std::vector<std::vector<bool>> accumulate;  // per node, per input: add into the input gradient
  // Per node: where its layer writes an input gradient nothing reads (the network input's), a
  // buffer live during its backward only (Layer::backward_writes_input_gradient).
  std::vector<int> discarded_input_grad;
  int labels = -1;

  int forward_time(int node) const { return node; }
  int loss_time() const { return last_node + 1; }
  int backward_time(int node) const { return 2 * last_node + 2 - node; }
  int last_node = 0;

  std::size_t arena_bytes() const { return plan.arena_bytes; }
};

// Throws ShapeError if a node's output is never read. workspace_limit bounds what one layer's
// workspace may take (the backend picks the fastest method within it).
StepPlan plan_step(Network& network, Backend& backend, int micro_batch, bool training,
                   std::size_t workspace_limit);

}  // namespace cnn
