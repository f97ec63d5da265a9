#include "engine/plan/detail/step_schedule.hpp"

#include <algorithm>
#include <stdexcept>

namespace cnn {
namespace {

class ScheduleBuilder {
 public:
  ScheduleBuilder(const Network& net, const RecomputeSet& recompute, StepSchedule& s)
      : net_(net), recompute_(recompute), s_(s), kept_copy_(static_cast<std::size_t>(net.size()), false),
        copy_burst_(static_cast<std::size_t>(net.size()), -1) {}

  void push(StepOpKind kind, int node) { s_.ops.push_back(StepOp{kind, node}); }

  // Backward of node id, after the recomputations of what it reads. The recomputations one
  // backward needs form a burst: within it a value is recomputed once.
  void backward(int id) {
    ++burst_;
    const Node& n = net_.node(id);
    if (!n.layer->is_view()) {
      if (n.layer->backward_needs_input())
        for (int in : n.inputs) ensure(net_.node(in).value, true);
      if (n.layer->backward_needs_output() || n.layer->recompute_rewrites_saved()) ensure(id, true);
    }
    s_.backward_time[static_cast<std::size_t>(id)] = s_.time_steps();
    push(StepOpKind::backward, id);
  }

 private:
  bool marked(int v) const {
    return static_cast<std::size_t>(v) < recompute_.size() && recompute_[static_cast<std::size_t>(v)];
  }

  // Makes value node v readable now: nothing for a kept value; else a copy recomputed in this
  // burst or kept from an earlier one, or a new one (after what it reads, temporarily). `keep`:
  // backward reads it, so the copy stays until its last read.
  void ensure(int v, bool keep) {
    const auto i = static_cast<std::size_t>(v);
    if (!marked(v) || kept_copy_[i]) return;
    if (copy_burst_[i] != burst_) {
      for (int in : net_.node(v).inputs) ensure(net_.node(in).value, false);
      s_.recomputed[i] = true;
      copy_burst_[i] = burst_;
      push(StepOpKind::recompute, v);
    }
    if (keep) kept_copy_[i] = true;
  }

  const Network& net_;
  const RecomputeSet& recompute_;
  StepSchedule& s_;
  std::vector<bool> kept_copy_;  // by node: a copy backward reads exists, and is read from now on
  std::vector<int> copy_burst_;  // by node: the burst of its latest copy
  int burst_ = 0;
};

// The last reads of each buffer, going through the operations in order: each read is of
// forward's buffer, or of the value's latest copy.
void find_last_reads(const Network& net, const std::vector<std::vector<int>>& readers, StepSchedule& s) {
  const int logits = net.node(net.last()).value;
  for (int v = 0; v < net.size(); ++v) {
    if (net.node(v).value != v) continue;
    int last = v == logits ? s.loss_time : v;
    for (int r : readers[static_cast<std::size_t>(v)]) last = std::max(last, r);  // forward_time(r) == r
    s.kept_until[static_cast<std::size_t>(v)] = last;
  }
  std::vector<int> copy(static_cast<std::size_t>(net.size()), -1);  // by node: the latest copy's time
  auto read = [&](int v, int t) {
    const int c = copy[static_cast<std::size_t>(v)];
    if (s.recomputes(v) && c < 0) throw std::logic_error("schedule_step: " + net.node(v).name + " read before it is recomputed");
    int& last = c >= 0 ? s.output_until[static_cast<std::size_t>(c)] : s.kept_until[static_cast<std::size_t>(v)];
    last = std::max(last, t);
  };
  for (int t = s.loss_time + 1; t < s.time_steps(); ++t) {
    const StepOp op = s.ops[static_cast<std::size_t>(t)];
    const Node& n = net.node(op.node);
    if (op.kind == StepOpKind::recompute) {
      for (int in : n.inputs) read(net.node(in).value, t);
      copy[static_cast<std::size_t>(op.node)] = t;
      s.output_until[static_cast<std::size_t>(t)] = t;  // written: live now even if never read (a dropout's output)
      if (n.layer->recompute_rewrites_saved()) s.saved_until[static_cast<std::size_t>(t)] = t;
      continue;
    }
    if (n.layer->is_view()) continue;
    if (n.layer->backward_needs_input())
      for (int in : n.inputs) read(net.node(in).value, t);
    if (n.layer->backward_needs_output()) read(op.node, t);
    if (const int c = copy[static_cast<std::size_t>(op.node)]; c >= 0 && n.layer->recompute_rewrites_saved())
      s.saved_until[static_cast<std::size_t>(c)] = t;
  }
}

}  // namespace

bool can_recompute(const Network& net, int node) {
  if (node <= 0 || node >= net.size()) return false;
  const Node& n = net.node(node);
  return !n.layer->is_view() && n.layer->recomputable() && node != net.node(net.last()).value && !net.frozen(node);
}

StepSchedule schedule_step(const Network& net, const std::vector<std::vector<int>>& readers, bool training,
                           const RecomputeSet& recompute) {
  if (!recompute.empty()) {
    if (recompute.size() != static_cast<std::size_t>(net.size()) || !training)
      throw std::logic_error("schedule_step: a recompute set for another network, or for inference");
    for (int id = 0; id < net.size(); ++id)
      if (recompute[static_cast<std::size_t>(id)] && !can_recompute(net, id))
        throw std::logic_error("schedule_step: node " + net.node(id).name + " cannot be recomputed");
  }
  const auto nodes = static_cast<std::size_t>(net.size());
  StepSchedule s;
  s.backward_time.assign(nodes, -1);
  s.kept_until.assign(nodes, -1);
  s.recomputed.assign(nodes, false);
  ScheduleBuilder builder(net, recompute, s);
  builder.push(StepOpKind::copy_in, 0);
  for (int id = 1; id < net.size(); ++id) builder.push(StepOpKind::forward, id);
  s.loss_time = s.time_steps();
  builder.push(StepOpKind::loss, net.last());
  if (training)  // backward stops after the frozen nodes (Network::freeze_through)
    for (int id = net.last(); id > net.frozen_through(); --id) builder.backward(id);
  s.output_until.assign(s.ops.size(), -1);
  s.saved_until.assign(s.ops.size(), -1);
  find_last_reads(net, readers, s);
  return s;
}

}  // namespace cnn
