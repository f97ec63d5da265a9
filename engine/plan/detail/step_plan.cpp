#include "engine/plan/detail/step_plan.hpp"

#include <algorithm>

#include <cnnengine/base/error.hpp>
#include <cnnengine/engine/core/backend.hpp>
#include <cnnengine/memory/memory_resource.hpp>

namespace cnn {

std::size_t StepPlan::largest_workspace() const {
  std::size_t largest = 0;
  for (const memory::BufferRequest& r : requests)
    if (r.category == memory::Category::workspace) largest = std::max(largest, r.bytes);
  return largest;
}
namespace {

using memory::BufferRequest;
using memory::Category;

enum class Role {
  value,
  value_grad,
  saved,
  forward_workspace,
  backward_workspace,
  discarded_input_grad,
  labels,
  loss_workspace,
  recomputed_value,
  recomputed_saved,
  recompute_workspace,
  forward_input_fp32,
  forward_output_fp32,
  backward_input_fp32,
  backward_output_fp32,
  recompute_input_fp32,
  recompute_output_fp32,
};

bool is_recomputation(Role role) {
  return role == Role::recomputed_value || role == Role::recomputed_saved || role == Role::recompute_workspace ||
         role == Role::recompute_input_fp32 || role == Role::recompute_output_fp32;
}

// Note [16-bit values]
// In bf16 or fp16 (StepNeeds::values) a value's buffer, and each recomputed copy's, holds 16-bit
// numbers: these are what a step keeps from forward to backward, so they set its peak. Layers
// still compute in float32 (the backends' kernels take float tensors): at each time step a layer
// runs, the values it reads are widened into float32 copies live at that step alone, and its
// output, written into a float32 copy, is rounded into its 16-bit buffer. So the next layer reads
// the rounded output, and backward reads exactly what forward read. What stays float32: the
// network input (its slot is the loader's), the logits the loss reads, every gradient (they add
// up over readers and micro-batches), and what layers save for backward (BatchNorm's statistics,
// dropout's mask). A layer that runs in place shares its input's 16-bit buffer as in fp32 (Note
// [In place]); a float32 value and a 16-bit one never share. The copies cost each layer a pass
// over its inputs and output, and one layer's float32 working set beside the 16-bit ones; on a
// backend that takes values as they are stored, the layers that say Layer::packed_values get the
// 16-bit buffers themselves and have no copies (takes_stored below).
bool stored_16bit(const Network& net, const StepNeeds& needs, int value) {
  return needs.values != ValueFormat::fp32 && value != 0 && value != net.node(net.last()).value;
}

// Whether the step hands the layers that say Layer::packed_values their 16-bit values as they are
// stored (Note [Values as they are stored], backend.hpp): those layers then read and write no
// float32 copies, and have none planned.
bool takes_stored(const StepNeeds& needs) {
  return needs.values != ValueFormat::fp32 && needs.values == needs.packed;
}

// Note [In place]
// A layer that runs in place (Layer::runs_in_place: ReLU, dropout, the activations whose
// derivative is a function of their output) writes its output over its input when nothing reads
// that input later: forward's buffer of the input is last read by this layer's forward
// (kept_until), so neither a later reader, nor the producer's backward, nor a recomputation
// needs it. The two values then get one buffer, live over both intervals. In backward, the input's
// gradient is written over the output's when this layer is the input's only reader: the input's
// gradient then begins at this layer's backward, where the output's gradient is read for the last
// time. Chains (conv, relu, dropout) share one buffer. The network input is never overwritten:
// it sits in its own slot, and has no gradient.
struct InPlace {
  std::vector<int> value_root, grad_root;  // by node: the node whose buffer it writes in (itself if none)
  std::vector<int> value_last, grad_last;  // by root: the last time its buffer is live
  std::vector<int> fused_relu;             // by node: Note [BatchNorm and ReLU in one pass]
  std::vector<int> fused_add;              // by node: Note [BatchNorm, add and ReLU in one pass]
  std::vector<int> add_over;               // by node: the BatchNorm input an add runs in place over, or 0
  std::vector<int> relu_in_forward;        // by node: Note [A convolution and its ReLU in one pass]
  bool shares_value(int id) const { return value_root[static_cast<std::size_t>(id)] != id; }
  bool shares_grad(int id) const { return grad_root[static_cast<std::size_t>(id)] != id; }
};

// Note [BatchNorm and ReLU in one pass]
// Where the backend runs them so (Backend::fuses_batchnorm_relu: the CPU, CUDA in bf16 and fp16), a
// BatchNorm whose output only a ReLU reads runs that ReLU in its own calls: forward writes
// max(BatchNorm(x), 0) once, and backward masks the ReLU's output gradient as it reads it, where
// the ReLU would make a pass of its own over the values each way. The pair must share its buffers
// in place already (Note [In place]): the ReLU's output is then the BatchNorm's buffer and the
// BatchNorm's output gradient the ReLU's input gradient, so the one change to the plan is that the
// BatchNorm's backward reads the ReLU's output, whose buffer then stays live until it (counted,
// as every buffer). Neither may be recomputed (a recomputation writes its output elsewhere), and
// the values need no float32 copies (they are float32, or 16 bits the layers take as stored). The
// step runs neither of the ReLU's calls then (StepExecutor), but for synchronised BatchNorm, which
// keeps its own calls: the buffers are the same either way. The CPU's fused passes, and the fused
// calls' default (the two calls each), give the unfused bits (tests/engine/plan/fused_batchnorm_relu_test.cpp).
bool fuses_batchnorm_relu(const StepNeeds& needs) {
  return needs.training && needs.fuse_batchnorm_relu && (needs.values == ValueFormat::fp32 || takes_stored(needs));
}

// fn(l, r) for each ReLU r whose input is a layer l of `kind` (Layer::relu_after) with a value of
// its own that only r reads, neither recomputed, r's value in l's buffer (Note [In place]).
template <class Fn>
void for_relu_after(const Network& net, const std::vector<std::vector<int>>& readers, const StepSchedule& s,
                    const InPlace& p, ReluAfter kind, Fn&& fn) {
  for (int r = 1; r < net.size(); ++r) {
    const Node& relu = net.node(r);
    if (!relu.layer->is_relu() || relu.inputs.size() != 1) continue;
    const int l = relu.inputs[0];
    const auto i = static_cast<std::size_t>(l);
    if (l == 0) continue;  // the network's input
    if (net.node(l).value != l || net.node(l).layer->relu_after() != kind || readers[i].size() != 1) continue;
    if (s.recomputes(l) || s.recomputes(r)) continue;
    if (p.value_root[static_cast<std::size_t>(r)] != p.value_root[i]) continue;
    fn(l, r);
  }
}

void fuse_batchnorm_relu(const Network& net, const std::vector<std::vector<int>>& readers, const StepSchedule& s,
                         InPlace& p) {
  for_relu_after(net, readers, s, p, ReluAfter::batchnorm, [&](int b, int r) {
    const auto i = static_cast<std::size_t>(b);
    if (!net.has_gradient(b)) return;  // a frozen layer's: no backward
    if (p.grad_root[i] != p.grad_root[static_cast<std::size_t>(r)]) return;
    p.fused_relu[i] = r;
    int& last = p.value_last[static_cast<std::size_t>(p.value_root[i])];
    last = std::max(last, s.backward_time[i]);
  });
}

// Note [A convolution and its ReLU in one pass]
// Where the backend runs them so (Backend::fuses_conv_relu: the CPU), a convolution whose output
// only a ReLU reads runs that ReLU in its forward call: it writes max(conv(x) + bias, 0) as it
// writes its output, where the ReLU would read the output back and write it again (the conv,
// ReLU stacks of networks without BatchNorm; a ReLU before max pooling has moved after it,
// Network::commute_relu_and_max_pool). Forward only: the ReLU's backward runs as its own call, at
// its own time, so that no buffer lives longer than without the fusion (the ReLU's output kept for
// the convolution's backward, as BatchNorm's fusion keeps it, made VGG-like networks' arenas 3 % to
// 10 % larger). The pair must share its buffer in place already (Note [In place]), and neither
// may be recomputed (a recomputation writes its output elsewhere); in inference too. The CPU's
// fused pass gives the unfused bits (tests/engine/plan/fused_batchnorm_relu_test.cpp).
bool fuses_conv_relu(const StepNeeds& needs) {
  return needs.fuse_conv_relu && (needs.values == ValueFormat::fp32 || takes_stored(needs));
}

void fuse_conv_relu(const Network& net, const std::vector<std::vector<int>>& readers, const StepSchedule& s,
                    InPlace& p) {
  for_relu_after(net, readers, s, p, ReluAfter::convolution,
                 [&](int c, int r) { p.relu_in_forward[static_cast<std::size_t>(c)] = r; });
}

// Note [BatchNorm, add and ReLU in one pass]
// A ResNet block ends max(BatchNorm(x) + residual, 0). Where the backend runs the three in one pass
// (fuses_batchnorm_add_relu: the CPU, CUDA in bf16 and fp16), the BatchNorm b runs the add a and
// the ReLU r when: a reads b and comes right after it (a = b + 1: the residual, a's other input, is there at
// b's forward, and nothing runs between the two either way), a alone reads b's output and r alone
// reads a's, and none of the three is recomputed. Forward then writes max(BatchNorm(x) + residual,
// 0) once, where the three layers would make a pass each over the values; backward masks r's output
// gradient as it reads it, writes the residual's gradient from it and goes on with BatchNorm's
// backward, where the ReLU and the add's two copies would make passes of their own. The plan gives
// the three values one buffer (the add runs in place over b's output, the ReLU over the add's: both
// inputs are read there alone) and their gradients one (b's output gradient is the add's output
// gradient, which is the ReLU's input gradient): the masked gradient is never written. That buffer
// of values stays live until b's backward, which reads r's output for the mask: two ops longer than
// r's output lived, which can raise the peak a little (resnet18 at 256 in bf16: 0.36 %; plan_step
// keeps the plan without the adds where it is more than 1 % smaller), so a backend that would only
// make the calls the fused ones are made of says it does not fuse them. The
// residual's gradient is written at b's backward instead of a's, which a = b + 1 makes the next
// backward op but recomputations, so the order of its writers, and their accumulate flags, stand. A
// step that does not run the three in one (synchronised BatchNorm) runs their own calls on the same
// buffers: the add writes over its input, and its gradient for b is in place already
// (Add::backward).
std::vector<int> adds_over_batchnorm(const Network& net, const std::vector<std::vector<int>>& readers,
                                     const StepNeeds& needs, const StepSchedule& s) {
  std::vector<int> over(static_cast<std::size_t>(net.size()), 0);
  auto only_reader = [&](int v) {
    const std::vector<int>& r = readers[static_cast<std::size_t>(v)];
    return r.size() == 1 ? r[0] : 0;
  };
  for (int a = 2; a < net.size(); ++a) {
    const Node& add = net.node(a);
    const int b = a - 1;
    if (!add.layer->is_add() || add.value != a || add.inputs.size() != 2 || add.inputs[0] == add.inputs[1]) continue;
    if (add.inputs[0] != b && add.inputs[1] != b) continue;
    const Node& bn = net.node(b);
    if (bn.value != b || bn.layer->relu_after() != ReluAfter::batchnorm || !net.has_gradient(b) || only_reader(b) != a)
      continue;
    const int r = only_reader(a);
    if (r == 0 || !net.node(r).layer->is_relu() || net.node(r).value != r || net.node(r).inputs.size() != 1) continue;
    if (s.recomputes(b) || s.recomputes(a) || s.recomputes(r)) continue;
    const bool stored = stored_16bit(net, needs, b);
    if (stored_16bit(net, needs, a) != stored || stored_16bit(net, needs, r) != stored) continue;
    if (s.kept_until[static_cast<std::size_t>(b)] != a || s.kept_until[static_cast<std::size_t>(a)] != r) continue;
    over[static_cast<std::size_t>(a)] = b;
  }
  return over;
}

// The adds that run in place over their BatchNorm (adds_over_batchnorm) whose ReLU shares the
// buffers too: the BatchNorm runs both, and the buffer of values stays live until its backward.
void fuse_batchnorm_add_relu(const Network& net, const std::vector<std::vector<int>>& readers,
                             const StepSchedule& s, InPlace& p) {
  for (int a = 1; a < net.size(); ++a) {
    const int b = p.add_over[static_cast<std::size_t>(a)];
    if (b == 0) continue;
    const int r = readers[static_cast<std::size_t>(a)][0];
    const auto bi = static_cast<std::size_t>(b), ai = static_cast<std::size_t>(a), ri = static_cast<std::size_t>(r);
    if (p.value_root[ri] != p.value_root[bi] || p.value_root[ai] != p.value_root[bi]) continue;
    if (p.grad_root[bi] != p.grad_root[ri] || p.grad_root[ai] != p.grad_root[ri]) continue;
    p.fused_relu[bi] = r;
    p.fused_add[bi] = a;
    int& last = p.value_last[static_cast<std::size_t>(p.value_root[bi])];
    last = std::max(last, s.backward_time[bi]);
  }
}

InPlace in_place(const Network& net, const std::vector<std::vector<int>>& readers, const StepNeeds& needs,
                 const StepSchedule& s, bool allowed) {
  const bool training = needs.training;
  const auto nodes = static_cast<std::size_t>(net.size());
  InPlace p;
  p.value_root.resize(nodes);
  p.grad_root.resize(nodes);
  p.value_last = s.kept_until;
  p.grad_last.assign(nodes, -1);
  p.fused_relu.assign(nodes, 0);
  p.fused_add.assign(nodes, 0);
  p.relu_in_forward.assign(nodes, 0);
  p.add_over = allowed && fuses_batchnorm_relu(needs) && needs.fuse_batchnorm_add_relu
                   ? adds_over_batchnorm(net, readers, needs, s)
                   : std::vector<int>(nodes, 0);
  for (int id = 0; id < net.size(); ++id) {
    p.value_root[static_cast<std::size_t>(id)] = p.grad_root[static_cast<std::size_t>(id)] = id;
    if (training && net.has_gradient(id))
      p.grad_last[static_cast<std::size_t>(id)] = s.backward_time[static_cast<std::size_t>(id)];
  }
  auto in_place_input = [&](int id) {
    const Node& n = net.node(id);
    if (const int b = p.add_over[static_cast<std::size_t>(id)]) return b;
    if (!allowed || n.layer->is_view() || !n.layer->runs_in_place() || n.inputs.size() != 1) return 0;
    const int v = net.node(n.inputs[0]).value;  // 0: the network input, never overwritten
    return stored_16bit(net, needs, v) == stored_16bit(net, needs, id) ? v : 0;
  };
  for (int id = 1; id < net.size(); ++id) {
    const int v = in_place_input(id);
    if (v == 0 || s.kept_until[static_cast<std::size_t>(v)] != id) continue;
    const int root = p.value_root[static_cast<std::size_t>(v)];
    p.value_root[static_cast<std::size_t>(id)] = root;
    int& last = p.value_last[static_cast<std::size_t>(root)];
    last = std::max(last, s.kept_until[static_cast<std::size_t>(id)]);
  }
  if (allowed && fuses_conv_relu(needs)) fuse_conv_relu(net, readers, s, p);
  if (!training) return p;
  for (int id = net.size() - 1; id >= 1; --id) {
    const int v = in_place_input(id);
    if (!net.has_gradient(v) || readers[static_cast<std::size_t>(v)].size() != 1) continue;
    const int root = p.grad_root[static_cast<std::size_t>(id)];
    p.grad_root[static_cast<std::size_t>(v)] = root;
    int& last = p.grad_last[static_cast<std::size_t>(root)];
    last = std::max(last, s.backward_time[static_cast<std::size_t>(v)]);
  }
  if (allowed && fuses_batchnorm_relu(needs)) {
    fuse_batchnorm_relu(net, readers, s, p);
    fuse_batchnorm_add_relu(net, readers, s, p);
  }
  return p;
}

// Every buffer of a step, in one fixed order, with its bytes and live interval: the one place
// that decides lifetimes. `sink(role, node, k, bytes, first, last, category)` receives each (for
// a recomputation's buffers, `node` is the time step it runs at).
template <class Sink>
void list_buffers(const Network& net, const std::vector<std::vector<int>>& readers, const StepNeeds& needs,
                  const StepSchedule& s, bool allow_in_place, Sink&& sink) {
  const bool training = needs.training;
  const int logits = net.node(net.last()).value;  // the buffer the loss reads (the last node may be a view)
  const auto b = static_cast<std::size_t>(needs.micro_batch);
  auto backward_time = [&](int id) { return s.backward_time[static_cast<std::size_t>(id)]; };
  auto output_bytes = [&](int id) { return net.node(id).shape.elements() * b * sizeof(float); };
  auto is_16bit = [&](int id) { return stored_16bit(net, needs, net.node(id).value); };
  auto stored_bytes = [&](int id) { return is_16bit(id) ? output_bytes(id) / 2 : output_bytes(id); };
  const InPlace shared = in_place(net, readers, needs, s, allow_in_place);
  // The float32 copies of 16-bit values that node `id`'s operation at time t reads (each input
  // where `inputs`) and writes or reads (its output where `output`), live at t alone.
  auto fp32_copies = [&](Role input_role, Role output_role, int id, int at, int t, bool inputs, bool output) {
    const Node& n = net.node(id);
    if (takes_stored(needs) && n.layer->packed_values()) return;
    if (inputs)
      for (std::size_t k = 0; k < n.inputs.size(); ++k)
        if (is_16bit(n.inputs[k]))
          sink(input_role, at, static_cast<int>(k), output_bytes(n.inputs[k]), t, t, Category::activations);
    if (output && is_16bit(id)) sink(output_role, at, 0, output_bytes(id), t, t, Category::activations);
  };

  // Each value's output buffer and its gradient, live from the producer's forward to the last use;
  // one buffer for a chain of values written in place (Note [In place]), listed at its first.
  for (int id = 0; id < net.size(); ++id) {
    const Node& n = net.node(id);
    if (n.value != id) continue;  // a view: shares its input's buffer
    const std::vector<int>& read_by = readers[static_cast<std::size_t>(id)];
    if (read_by.empty() && id != logits) throw ShapeError("node " + n.name + ": its output is never used");
    if (!shared.shares_value(id))
      sink(Role::value, id, 0, stored_bytes(id), id, shared.value_last[static_cast<std::size_t>(id)],
           id == 0 ? Category::data_staging : Category::activations);
    if (training && net.has_gradient(id)) {
      int first = id == logits ? s.loss_time : s.time_steps();
      for (int r : read_by) first = std::min(first, backward_time(r));
      if (!shared.shares_grad(id))
        sink(Role::value_grad, id, 0, output_bytes(id), first, shared.grad_last[static_cast<std::size_t>(id)],
             Category::activations);
    }
  }

  // What each layer keeps for backward, and its workspaces.
  for (int id = 1; id < net.size(); ++id) {
    const Node& n = net.node(id);
    if (n.layer->is_view()) continue;
    const auto i = static_cast<std::size_t>(id);
    const bool backward = training && !net.frozen(id);  // a frozen layer runs forward alone
    if (training) {
      // Saved buffers the recomputation writes again, and a frozen layer's in train mode
      // (Network::set_frozen_mode), are forward's scratch only.
      const bool scratch = !backward || (s.recomputes(id) && n.layer->recompute_rewrites_saved());
      for (std::size_t k = 0; k < needs.saved_bytes[i].size(); ++k)
        sink(Role::saved, id, static_cast<int>(k), needs.saved_bytes[i][k], id, scratch ? id : backward_time(id),
             Category::activations);
    }
    fp32_copies(Role::forward_input_fp32, Role::forward_output_fp32, id, id, id, true, true);
    if (backward)
      fp32_copies(Role::backward_input_fp32, Role::backward_output_fp32, id, id, backward_time(id),
                  n.layer->backward_needs_input(), n.layer->backward_needs_output());
    if (needs.forward_workspace[i]) sink(Role::forward_workspace, id, 0, needs.forward_workspace[i], id, id, Category::workspace);
    if (backward && needs.backward_workspace[i])
      sink(Role::backward_workspace, id, 0, needs.backward_workspace[i], backward_time(id), backward_time(id),
           Category::workspace);
    if (backward && n.layer->backward_writes_input_gradient()) {
      // The network input and the frozen layers' outputs have no gradient buffer: their reader
      // writes into one to discard.
      std::size_t largest = 0;
      for (int in : n.inputs)
        if (!net.has_gradient(net.node(in).value)) largest = std::max(largest, output_bytes(in));
      if (largest)
        sink(Role::discarded_input_grad, id, 0, largest, backward_time(id), backward_time(id), Category::activations);
    }
  }
  sink(Role::labels, 0, 0, b * net.target_bytes(), 0, s.loss_time, Category::data_staging);
  if (needs.loss_workspace)
    sink(Role::loss_workspace, 0, 0, needs.loss_workspace, s.loss_time, s.loss_time, Category::workspace);

  for (int t = s.loss_time + 1; t < s.time_steps(); ++t) {
    const StepOp op = s.ops[static_cast<std::size_t>(t)];
    if (op.kind != StepOpKind::recompute) continue;
    const auto i = static_cast<std::size_t>(op.node), at = static_cast<std::size_t>(t);
    sink(Role::recomputed_value, t, 0, stored_bytes(op.node), t, s.output_until[at], Category::activations);
    fp32_copies(Role::recompute_input_fp32, Role::recompute_output_fp32, op.node, t, t, true, true);
    if (s.saved_until[at] >= 0)
      for (std::size_t k = 0; k < needs.saved_bytes[i].size(); ++k)
        sink(Role::recomputed_saved, t, static_cast<int>(k), needs.saved_bytes[i][k], t, s.saved_until[at],
             Category::activations);
    if (needs.forward_workspace[i]) sink(Role::recompute_workspace, t, 0, needs.forward_workspace[i], t, t, Category::workspace);
  }
}

std::string request_name(const Network& net, const StepSchedule& s, Role role, int id, int k) {
  const bool recomputation = is_recomputation(role);
  const std::string& name = net.node(recomputation ? s.ops[static_cast<std::size_t>(id)].node : id).name;
  const std::string at = recomputation ? " at " + std::to_string(id) : "";
  switch (role) {
    case Role::value: return id == 0 ? "input" : name;
    case Role::value_grad: return "grad " + name;
    case Role::saved: return "saved " + name + "." + std::to_string(k);
    case Role::forward_workspace: return "workspace " + name;
    case Role::backward_workspace: return "workspace back " + name;
    case Role::discarded_input_grad: return "discarded grad " + name;
    case Role::labels: return "labels";
    case Role::loss_workspace: return "workspace loss";
    case Role::recomputed_value: return "recomputed " + name + at;
    case Role::recomputed_saved: return "recomputed saved " + name + "." + std::to_string(k) + at;
    case Role::recompute_workspace: return "workspace recompute " + name + at;
    case Role::forward_input_fp32: return "fp32 input " + std::to_string(k) + " of " + name;
    case Role::forward_output_fp32: return "fp32 " + name;
    case Role::backward_input_fp32: return "fp32 back input " + std::to_string(k) + " of " + name;
    case Role::backward_output_fp32: return "fp32 back " + name;
    case Role::recompute_input_fp32: return "fp32 recompute input " + std::to_string(k) + " of " + name + at;
    case Role::recompute_output_fp32: return "fp32 recompute " + name + at;
  }
  return name;
}

// The slot in the node's record that a request fills.
void record(StepPlan& p, Role role, int id, int k, int index) {
  auto at = [&](std::vector<int>& slots) -> int& {
    if (slots.size() <= static_cast<std::size_t>(k)) slots.resize(static_cast<std::size_t>(k) + 1, -1);
    return slots[static_cast<std::size_t>(k)];
  };
  if (is_recomputation(role)) {
    RecomputeBuffers& r = p.recomputations[static_cast<std::size_t>(id)];
    switch (role) {
      case Role::recomputed_value: r.output = index; break;
      case Role::recomputed_saved: r.saved.push_back(index); break;
      case Role::recompute_workspace: r.workspace = index; break;
      case Role::recompute_input_fp32: at(r.inputs_fp32) = index; break;
      case Role::recompute_output_fp32: r.output_fp32 = index; break;
      default: break;
    }
    return;
  }
  NodeBuffers& n = p.nodes[static_cast<std::size_t>(id)];
  switch (role) {
    case Role::value: n.value = index; break;
    case Role::value_grad: n.value_grad = index; break;
    case Role::saved: n.saved.push_back(index); break;
    case Role::forward_workspace: n.forward_workspace = index; break;
    case Role::backward_workspace: n.backward_workspace = index; break;
    case Role::discarded_input_grad: n.discarded_input_grad = index; break;
    case Role::labels: p.labels = index; break;
    case Role::loss_workspace: p.loss_workspace = index; break;
    case Role::forward_input_fp32: at(n.forward_inputs_fp32) = index; break;
    case Role::forward_output_fp32: n.forward_output_fp32 = index; break;
    case Role::backward_input_fp32: at(n.backward_inputs_fp32) = index; break;
    case Role::backward_output_fp32: n.backward_output_fp32 = index; break;
    default: break;
  }
}

// The reader that runs backward first (the latest in forward order) writes each input gradient;
// the others, and a second use of the same input by this layer, add to it. A gradient of the
// network input's, written to be discarded, is never added to.
std::vector<bool> accumulate_flags(const Network& net, const std::vector<std::vector<int>>& readers, bool training,
                                   int id) {
  const Node& n = net.node(id);
  std::vector<bool> acc(n.inputs.size(), false);
  for (std::size_t k = 0; k < n.inputs.size(); ++k) {
    const int v = net.node(n.inputs[k]).value;
    acc[k] = readers[static_cast<std::size_t>(v)].back() > id;
    for (std::size_t j = 0; j < k && !acc[k]; ++j) acc[k] = net.node(n.inputs[j]).value == v;
    if (training && n.layer->backward_writes_input_gradient() && !net.has_gradient(v)) acc[k] = false;
  }
  return acc;
}

}  // namespace

// Note [Channels-last images] (tensor.hpp): a training step keeps its images between layers
// channels last where the backend takes them and every layer does, the network's output reads
// alike either way, and the network's input, which stays as it is staged (NCHW), is read only by
// layers that reorder it (or reads alike either way too). Inference keeps NCHW.
bool channels_last_step(const Network& net, const Backend& backend, bool training) {
  if (!training || !backend.takes_channels_last() || !one_order(net.output_shape())) return false;
  const bool input_either_way = one_order(net.node(0).shape);
  for (int id = 1; id < net.size(); ++id) {
    const Node& n = net.node(id);
    if (!n.layer->takes_channels_last()) return false;
    for (int in : n.inputs)
      if (in == 0 && !input_either_way && !n.layer->takes_nchw_input()) return false;
  }
  return true;
}

StepNeeds step_needs(Network& net, Backend& backend, int micro_batch, bool training, std::size_t workspace_limit) {
  if (micro_batch <= 0) throw ConfigError("plan_step: micro-batch must be positive");
  StepNeeds needs;
  needs.micro_batch = micro_batch;
  needs.training = training;
  needs.channels_last = channels_last_step(net, backend, training);
  const bool input_channels_last = needs.channels_last && one_order(net.node(0).shape);
  const auto nodes = static_cast<std::size_t>(net.size());
  needs.saved_bytes.resize(nodes);
  needs.forward_workspace.assign(nodes, 0);
  needs.backward_workspace.assign(nodes, 0);
  for (int id = 1; id < net.size(); ++id) {
    Layer& layer = *net.node(id).layer;
    if (layer.is_view()) continue;
    const auto i = static_cast<std::size_t>(id);
    // A frozen layer runs forward alone: in eval mode as in inference, in train mode with what it
    // saves as scratch (Network::set_frozen_mode).
    const bool backward = training && !net.frozen(id);
    std::vector<bool> inputs_channels_last;
    for (int in : net.node(id).inputs)
      inputs_channels_last.push_back(in == 0 ? input_channels_last : needs.channels_last);
    layer.use_orders(inputs_channels_last, needs.channels_last);
    if (training && net.runs_in_training(id))
      for (std::size_t floats : layer.saved_floats(micro_batch)) needs.saved_bytes[i].push_back(floats * sizeof(float));
    needs.forward_workspace[i] = layer.workspace_bytes(backend, micro_batch, ConvPass::forward, workspace_limit);
    if (backward) needs.backward_workspace[i] = layer.workspace_bytes(backend, micro_batch, ConvPass::backward, workspace_limit);
  }
  needs.loss_workspace = backend.loss_workspace_bytes(net.task(), net.output_shape().batched(micro_batch));
  needs.packed = backend.takes_packed_values() ? value_format(backend.precision()) : ValueFormat::fp32;
  needs.fuse_batchnorm_relu = backend.fuses_batchnorm_relu();
  needs.fuse_batchnorm_add_relu = backend.fuses_batchnorm_add_relu();
  needs.fuse_conv_relu = backend.fuses_conv_relu();
  return needs;
}

namespace {

StepPlan plan_with(const Network& net, const std::vector<std::vector<int>>& readers, const StepNeeds& needs,
                   const StepSchedule& schedule, bool allow_in_place) {
  StepPlan p;
  p.training = needs.training;
  p.micro_batch = needs.micro_batch;
  p.last_node = net.last();
  p.time_steps = schedule.time_steps();
  p.ops = schedule.ops;
  p.backward_times = schedule.backward_time;
  p.nodes.assign(static_cast<std::size_t>(net.size()), NodeBuffers{});
  p.recomputations.assign(schedule.ops.size(), RecomputeBuffers{});
  for (const StepOp& op : schedule.ops)
    if (op.kind == StepOpKind::recompute) p.recomputed.push_back(op.node);
  list_buffers(net, readers, needs, schedule, allow_in_place,
               [&](Role role, int id, int k, std::size_t bytes, int first, int last, Category category) {
                 p.requests.push_back(BufferRequest{request_name(net, schedule, role, id, k), bytes, first, last, category});
                 record(p, role, id, k, static_cast<int>(p.requests.size()) - 1);
               });
  p.values = needs.values;
  p.packed_values = takes_stored(needs);
  p.channels_last = needs.channels_last;
  p.stored_16bit.assign(static_cast<std::size_t>(net.size()), false);
  for (int id = 0; id < net.size(); ++id) p.stored_16bit[static_cast<std::size_t>(id)] = stored_16bit(net, needs, net.node(id).value);
  const InPlace shared = in_place(net, readers, needs, schedule, allow_in_place);
  for (int id = 1; id < net.size(); ++id) {
    NodeBuffers& n = p.nodes[static_cast<std::size_t>(id)];
    if (shared.shares_value(id)) {
      n.value = p.node(shared.value_root[static_cast<std::size_t>(id)]).value;
      p.in_place.push_back(id);
    }
    if (shared.shares_grad(id)) n.value_grad = p.node(shared.grad_root[static_cast<std::size_t>(id)]).value_grad;
  }
  p.fused_relu = shared.fused_relu;
  p.fused_add = shared.fused_add;
  p.relu_in_forward = shared.relu_in_forward;
  p.forward_into.assign(static_cast<std::size_t>(net.size()), 0);
  for (int id = 1; id < net.size(); ++id)
    if (const int r = p.relu_in_forward[static_cast<std::size_t>(id)]) p.forward_into[static_cast<std::size_t>(r)] = id;
  p.fused_into.assign(static_cast<std::size_t>(net.size()), 0);
  for (int id = 1; id < net.size(); ++id) {
    if (const int r = p.fused_relu[static_cast<std::size_t>(id)]) p.fused_into[static_cast<std::size_t>(r)] = id;
    if (const int a = p.fused_add[static_cast<std::size_t>(id)]) p.fused_into[static_cast<std::size_t>(a)] = id;
  }
  for (int id = 1; id < net.size(); ++id)
    if (!net.node(id).layer->is_view()) p.nodes[static_cast<std::size_t>(id)].accumulate = accumulate_flags(net, readers, p.training, id);
  p.plan = memory::plan_offsets(p.requests, memory::kDefaultAlignment);
  return p;
}

}  // namespace

// Sharing a buffer never raises the liveness lower bound (nor, in the presets, lowers it: the
// moment both buffers are live is never the step's peak), but fewer and longer buffers change how
// the offsets pack: resnet's arena at micro-batch 64 came down from 1.014 x the lower bound to
// 1.000 x, small's at 16 went up 1.4 %. So both plans are made and the smaller arena is kept, but
// that a plan running BatchNorm and ReLU in one pass (which needs the sharing: Note [BatchNorm and
// ReLU in one pass]) is kept unless the other is more than 1 % smaller: the ReLU's own passes took
// 8 % of a resnet18 bf16 step's kernel time on an H200 (benchmarks/results/gpu_h200_best_peer.md).
// So is one where convolutions run the ReLU after them (Note [A convolution and its ReLU in one
// pass]).
// A plan that runs the residual adds in their BatchNorm too (Note [BatchNorm, add and ReLU in one
// pass]) keeps values longer; it is kept on the same terms against the one that fuses the pairs
// alone: resnet50 at 224 on the CPU, 0.18 % larger for 4 % of its step, kept; resnet on 1x28x28 at
// micro-batch 64 (and on 1x64x64 at 16), 1.4 % (2.6 %) larger, not.
StepPlan plan_step(const Network& net, const StepNeeds& needs, const RecomputeSet& recompute) {
  const std::vector<std::vector<int>> readers = net.value_readers();
  const StepSchedule schedule = schedule_step(net, readers, needs.training, recompute);
  if (needs.in_place == InPlaceSharing::never) return plan_with(net, readers, needs, schedule, false);
  StepPlan shared = plan_with(net, readers, needs, schedule, true);
  if (shared.in_place.empty() || needs.in_place == InPlaceSharing::always) return shared;
  if (std::any_of(shared.fused_add.begin(), shared.fused_add.end(), [](int a) { return a != 0; })) {
    StepNeeds pairs_alone = needs;
    pairs_alone.fuse_batchnorm_add_relu = false;
    StepPlan pairs = plan_with(net, readers, pairs_alone, schedule, true);
    if (pairs.arena_bytes() < shared.arena_bytes() / 101 * 100) shared = std::move(pairs);
  }
  StepPlan separate = plan_with(net, readers, needs, schedule, false);
  auto any = [](const std::vector<int>& by_node) {
    return std::any_of(by_node.begin(), by_node.end(), [](int r) { return r != 0; });
  };
  const bool fused = any(shared.fused_relu) || any(shared.relu_in_forward);
  const std::size_t kept_if_within = fused ? shared.arena_bytes() / 101 * 100 : shared.arena_bytes();
  return separate.arena_bytes() < kept_if_within ? separate : shared;
}

ValueFormat chosen_value_format(const Network& net, StepNeeds needs, ValueFormat wanted, NarrowValues policy) {
  if (wanted == ValueFormat::fp32 || policy == NarrowValues::always) return wanted;
  needs.values = ValueFormat::fp32;
  const std::size_t wide = plan_step(net, needs).arena_bytes();
  needs.values = wanted;
  return plan_step(net, needs).arena_bytes() < wide ? wanted : ValueFormat::fp32;
}

StepPlan plan_step(Network& net, Backend& backend, int micro_batch, bool training, std::size_t workspace_limit,
                   const RecomputeSet& recompute) {
  return plan_step(net, step_needs(net, backend, micro_batch, training, workspace_limit), recompute);
}

std::vector<std::size_t> live_bytes(const Network& net, const std::vector<std::vector<int>>& readers,
                                    const StepNeeds& needs, const StepSchedule& schedule) {
  std::vector<std::ptrdiff_t> change(static_cast<std::size_t>(schedule.time_steps()) + 1, 0);
  list_buffers(net, readers, needs, schedule, true, [&](Role, int, int, std::size_t bytes, int first, int last, Category) {
    const auto aligned = static_cast<std::ptrdiff_t>(memory::align_up(std::max<std::size_t>(bytes, 1), memory::kDefaultAlignment));
    change[static_cast<std::size_t>(first)] += aligned;
    change[static_cast<std::size_t>(last) + 1] -= aligned;
  });
  std::vector<std::size_t> live(static_cast<std::size_t>(schedule.time_steps()));
  std::ptrdiff_t running = 0;
  for (std::size_t t = 0; t < live.size(); ++t) live[t] = static_cast<std::size_t>(running += change[t]);
  return live;
}

}  // namespace cnn
