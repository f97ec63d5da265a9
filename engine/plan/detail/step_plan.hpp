#pragma once
// Every buffer one step touches (input and label slots, activations, their gradients, what
// layers save for backward, layer workspaces, recomputed outputs) with the time steps it is live,
// and their offsets in the step arena. Time runs through the step's operations
// (step_schedule.hpp): 0 input copy, i forward of node i (1..L), L+1 loss, then backward in
// reverse, each recomputation one step of its own just before the backward that first reads it.
// Without recomputation backward of node i runs at 2L+2-i. A plan with `training` false is the
// forward-only mode inference runs on (engine/infer): no gradients, nothing saved for backward,
// each output given back after its last forward reader.
#include <vector>

#include <cnnengine/engine/core/network.hpp>
#include "engine/plan/detail/step_schedule.hpp"
#include <cnnengine/engine/plan/memory_report.hpp>
#include "memory/detail/planner.hpp"

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
  // 16-bit values (StepNeeds::values): the float32 copies the layer reads and writes, each live at
  // the one time step it runs. Per input (indexed as the node's inputs; shorter, or -1, where that
  // input is float32 already), and the output's; backward's only of what backward reads. None for a
  // layer the step hands its values as they are stored (StepPlan::packed_values).
  std::vector<int> forward_inputs_fp32;
  int forward_output_fp32 = -1;
  std::vector<int> backward_inputs_fp32;
  int backward_output_fp32 = -1;
};

// One recomputation's buffers: indices into StepPlan::requests, -1 where there is none. Later
// reads of the value, until its next recomputation, are of `output`.
struct RecomputeBuffers {
  int output = -1;
  std::vector<int> saved;  // the saved buffers it writes again; empty: the layer reads forward's
  int workspace = -1;
  std::vector<int> inputs_fp32;  // 16-bit values: as NodeBuffers's forward copies
  int output_fp32 = -1;
};

struct StepPlan {
  bool training = true;
  int micro_batch = 0;
  int time_steps = 0;  // times run from 0 to time_steps-1
  int last_node = 0;
  std::vector<StepOp> ops;  // by time step
  std::vector<memory::BufferRequest> requests;
  memory::Plan plan;
  std::vector<NodeBuffers> nodes;  // by node id
  int labels = -1;          // the targets' slot: a classification's labels, a segmentation's masks, ...
  int loss_workspace = -1;  // the loss's scratch (Backend::loss_workspace_bytes), at the loss's time step
  std::vector<int> backward_times;                // by node (training)
  std::vector<RecomputeBuffers> recomputations;  // by time step, where a recomputation runs
  std::vector<int> recomputed;  // the node of each recomputation, in the order they run
  std::vector<int> in_place;    // the nodes whose output is written over their input's (step_plan.cpp, Note [In place])
  // By node (step_plan.cpp, Notes [BatchNorm and ReLU in one pass] and [BatchNorm, add and ReLU in
  // one pass]): the ReLU a BatchNorm runs in its own calls, the add it runs before that ReLU, and
  // the BatchNorm that runs a ReLU's or an add's; 0 where none.
  std::vector<int> fused_relu, fused_add, fused_into;
  // By node (step_plan.cpp, Note [A convolution and its ReLU in one pass]): the ReLU a convolution
  // runs in its forward call, and the convolution that runs a ReLU's forward; 0 where none.
  std::vector<int> relu_in_forward, forward_into;
  int relu_in_forward_of(int id) const {
    return relu_in_forward.empty() ? 0 : relu_in_forward[static_cast<std::size_t>(id)];
  }
  bool forward_runs_within(int id) const {
    return !forward_into.empty() && forward_into[static_cast<std::size_t>(id)] != 0;
  }
  ValueFormat values = ValueFormat::fp32;
  std::vector<bool> stored_16bit;  // by value node: its buffers hold `values` (16 bits), not float32
  // The values are in the 16-bit format the backend takes as they are stored (StepNeeds::packed):
  // a layer that says Layer::packed_values gets them so, and has no float32 copies.
  bool packed_values = false;
  // The images between layers lie channels last (Note [Channels-last images], tensor.hpp): every
  // rank-4 value and gradient but the network input's where that input has more than one order
  // (images_channels_last).
  bool channels_last = false;
  bool images_channels_last(const Network& network, int node) const {
    return channels_last && (node != 0 || one_order(network.node(0).shape));
  }

  int forward_time(int node) const { return node; }
  int loss_time() const { return last_node + 1; }
  int backward_time(int node) const { return backward_times[static_cast<std::size_t>(node)]; }
  std::size_t arena_bytes() const { return plan.arena_bytes; }
  // The largest workspace one layer asks (0: none).
  std::size_t largest_workspace() const;
  const NodeBuffers& node(int id) const { return nodes[static_cast<std::size_t>(id)]; }
  bool stores_16bit(int value_node) const { return stored_16bit[static_cast<std::size_t>(value_node)]; }
};

// Whether layers that may run in place share their input's buffer (step_plan.cpp, Note [In
// place]): where the arena comes out smaller (the plan is made both ways), always, or never.
enum class InPlaceSharing { where_smaller, always, never };

// What the layers ask of a step at one micro-batch beyond their inputs and outputs, by node:
// saved buffers and workspaces (the backend's answer for the workspace limit).
struct StepNeeds {
  int micro_batch = 0;
  bool training = true;
  InPlaceSharing in_place = InPlaceSharing::where_smaller;
  std::vector<std::vector<std::size_t>> saved_bytes;
  std::vector<std::size_t> forward_workspace, backward_workspace;
  std::size_t loss_workspace = 0;  // the loss's (Backend::loss_workspace_bytes)
  // How values between layers are stored (step_plan.cpp, Note [16-bit values]): in 16 bits, all
  // but the network input and the loss's logits, which stay float32.
  ValueFormat values = ValueFormat::fp32;
  // The 16-bit format the backend takes values in as they are stored (Backend::takes_packed_values:
  // value_format of its precision), fp32 where it takes none. Where `values` is that format, the
  // layers that say Layer::packed_values need no float32 copies.
  ValueFormat packed = ValueFormat::fp32;
  // The backend runs a ReLU after BatchNorm in BatchNorm's calls (Backend::fuses_batchnorm_relu;
  // step_plan.cpp, Note [BatchNorm and ReLU in one pass]).
  bool fuse_batchnorm_relu = false;
  // And the residual add before that ReLU (Backend::fuses_batchnorm_add_relu; step_plan.cpp, Note
  // [BatchNorm, add and ReLU in one pass]).
  bool fuse_batchnorm_add_relu = false;
  // A convolution's calls run the ReLU after it (Backend::fuses_conv_relu; step_plan.cpp, Note [A
  // convolution and its ReLU in one pass]).
  bool fuse_conv_relu = false;
  // The step's images lie channels last (Note [Channels-last images], tensor.hpp; step_needs).
  bool channels_last = false;
};

StepNeeds step_needs(Network& network, Backend& backend, int micro_batch, bool training, std::size_t workspace_limit);
// Whether a step of `network` on `backend` keeps its images channels last (StepNeeds::channels_last).
bool channels_last_step(const Network& network, const Backend& backend, bool training);

// The format a step at `needs` (its `values` ignored) stores its values in: `wanted`, or fp32
// where `policy` is where_smaller and the float32 plan is no larger. Recomputation is chosen
// after this, so a step recomputing stores its values as one keeping them does.
ValueFormat chosen_value_format(const Network& network, StepNeeds needs, ValueFormat wanted, NarrowValues policy);

// Throws ShapeError if a node's output is never read.
StepPlan plan_step(const Network& network, const StepNeeds& needs, const RecomputeSet& recompute = {});
// workspace_limit bounds what one layer's workspace may take (the backend picks the fastest
// method within it).
StepPlan plan_step(Network& network, Backend& backend, int micro_batch, bool training, std::size_t workspace_limit,
                   const RecomputeSet& recompute = {});

// The bytes live at each time step of the training plan for `recompute` (each buffer aligned as
// the offset planner aligns it): the liveness lower bound is their maximum. No offsets, no names:
// what the recomputation search evaluates, many times per plan.
std::vector<std::size_t> live_bytes(const Network& network, const std::vector<std::vector<int>>& readers,
                                    const StepNeeds& needs, const StepSchedule& schedule);

}  // namespace cnn
