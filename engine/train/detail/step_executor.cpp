#include "engine/train/detail/step_executor.hpp"

#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include <cnnengine/base/error.hpp>
#include "engine/core/detail/batch_checks.hpp"

namespace cnn {

StepExecutor::StepExecutor(Network& network, Backend& backend, ParameterStore& params, const StepPlan& plan,
                           StepMemory& memory, StepSlots slots, bool capture)
    : net_(network), backend_(backend), params_(params), plan_(plan), memory_(memory), slots_(slots),
      capture_(capture),
      packed_values_(plan.packed_values),
      channels_last_(plan.channels_last && !slots.cross_rank) {
  if (packed_values_ && (!backend.takes_packed_values() || plan.values != value_format(backend.precision())))
    throw std::logic_error("step plan: made for a backend that takes " + to_string(plan.values) +
                           " values as they are stored, run on " + backend.description());
  // Sized once so that a step allocates nothing on the host either.
  std::size_t most_inputs = 0, most_saved = 0;
  for (int id = 1; id < net_.size(); ++id) {
    most_inputs = std::max(most_inputs, net_.node(id).inputs.size());
    most_saved = std::max(most_saved, plan_.node(id).saved.size());
  }
  inputs_.reserve(most_inputs);
  grad_inputs_.reserve(most_inputs);
  saved_.reserve(most_saved);
  accumulate_ = std::make_unique<bool[]>(most_inputs);
  copies_.assign(static_cast<std::size_t>(net_.size()), -1);
  ran_once_.reserve(kMaxRecordings);
  graphs_.reserve(kMaxRecordings);
}

Tensor StepExecutor::buffer(int index, Shape shape) const {
  if (index < 0) return Tensor{};
  return Tensor{static_cast<float*>(memory_.address(index)), shape};
}

Shape StepExecutor::batched(int node, int n) const {
  Shape shape = net_.node(node).shape.batched(n);
  shape.channels_last = channels_last_ && shape.rank == 4 && plan_.images_channels_last(net_, node);
  return shape;
}

Tensor StepExecutor::value(int node, int n) const {
  return buffer(plan_.node(net_.node(node).value).value, batched(node, n));
}

int StepExecutor::backward_buffer(int node) const {
  const int v = net_.node(node).value;
  const int copy = copies_[static_cast<std::size_t>(v)];
  return copy >= 0 ? plan_.recomputations[static_cast<std::size_t>(copy)].output : plan_.node(v).value;
}

Tensor StepExecutor::readable(int node, int n, bool after_loss, int fp32, bool read, bool as_stored) {
  const Node& nd = net_.node(node);
  const int index = after_loss ? backward_buffer(node) : plan_.node(nd.value).value;
  const Shape shape = batched(node, n);
  if (!plan_.stores_16bit(nd.value)) return buffer(index, shape);
  if (!read) return Tensor{nullptr, shape};
  void* stored = memory_.address(index);
  if (packed_values_ && as_stored) return Tensor{nullptr, shape, stored};
  if (fp32 < 0) throw std::logic_error("step plan: no float32 copy of " + nd.name + " where a layer reads it");
  Tensor wide = buffer(fp32, shape);
  backend_.from_16bit(stored, wide, plan_.values);
  if (packed_values_) wide.packed16 = stored;
  return wide;
}

Tensor StepExecutor::gradient(int node, int n) const {
  return buffer(plan_.node(net_.node(node).value).value_grad, batched(node, n));
}

void StepExecutor::run(const Batch& batch, float grad_scale, std::uint64_t seed, float* logits,
                       GradientBuckets* buckets) {
  const int n = batch.size;
  check_micro_batch(n, plan_.micro_batch);
  memory_.begin(0);
  const StepScalars scalars{seed, static_cast<std::uint64_t>(batch.first), grad_scale};
  slots_.input->stage(batch, scalars, value(0, n).data, memory_.address(plan_.labels), slots_.scalars);
  memory_.end(0);
  if (logits || buckets) compute(n, logits, buckets);
  else compute_or_replay(n);
}

void StepExecutor::compute_or_replay(int n) {
  if (!capture_) return compute(n);
  for (Recording& r : graphs_) {
    if (r.batch != n) continue;
    r.calls->replay();
    ++replays_;
    return;
  }
  const bool second_run = std::find(ran_once_.begin(), ran_once_.end(), n) != ran_once_.end();
  if (!second_run || graphs_.size() == kMaxRecordings) {
    // A size's first run is eager: the libraries set themselves up outside the recording.
    if (!second_run && ran_once_.size() < kMaxRecordings) ran_once_.push_back(n);
    return compute(n);
  }
  std::unique_ptr<CapturedCalls> calls;
  try {
    backend_.begin_capture();
    try {
      compute(n);
    } catch (...) {
      backend_.abort_capture();
      throw;
    }
    calls = backend_.end_capture();
  } catch (const std::exception& e) {
    // Nothing of the step ran while capturing: run it eagerly, and every later step too.
    capture_ = false;
    capture_failure_ = e.what();
    return compute(n);
  }
  graphs_.push_back(Recording{n, std::move(calls)});
  graphs_.back().calls->replay();
  ++replays_;
}

void StepExecutor::compute(int n, float* logits, GradientBuckets* buckets) {
  const bool training = plan_.training;
  const int L = net_.last();
  void* targets = memory_.address(plan_.labels);

  auto& inputs = inputs_;
  auto& saved = saved_;
  auto& grad_inputs = grad_inputs_;
  // After the loss, a recomputed value is read from its latest copy, and so are the saved buffers
  // its recomputation wrote again. `fp32`: the float32 copies of the inputs stored in 16 bits.
  auto gather = [&](const Node& nd, int id, bool after_loss, int recomputation, const std::vector<int>& fp32,
                    bool read) {
    inputs.clear();
    for (std::size_t k = 0; k < nd.inputs.size(); ++k)
      inputs.push_back(
          readable(nd.inputs[k], n, after_loss, k < fp32.size() ? fp32[k] : -1, read, nd.layer->packed_values()));
    saved.clear();
    const int copy = recomputation >= 0 ? recomputation : after_loss ? copies_[static_cast<std::size_t>(id)] : -1;
    const std::vector<int>* rewritten = copy >= 0 ? &plan_.recomputations[static_cast<std::size_t>(copy)].saved : nullptr;
    for (int s : rewritten && !rewritten->empty() ? *rewritten : plan_.node(id).saved) {
      const auto floats = plan_.requests[static_cast<std::size_t>(s)].bytes / sizeof(float);
      saved.push_back(buffer(s, Shape{static_cast<int>(floats)}));
    }
  };
  // Where a layer writes an output stored in 16 bits: its float32 copy, rounded into `stored` after;
  // or, for a layer that takes its values as they are stored, `stored` itself, 16 bits alone
  // (Note [Values as they are stored], backend.hpp).
  auto as_stored = [&](const Node& nd) { return packed_values_ && nd.layer->packed_values(); };
  auto writable = [&](int id, int stored, int fp32) {
    const Node& nd = net_.node(id);
    const Shape shape = batched(id, n);
    if (!plan_.stores_16bit(nd.value)) return buffer(stored, shape);
    if (as_stored(nd)) return Tensor{nullptr, shape, memory_.address(stored)};
    if (fp32 < 0) throw std::logic_error("step plan: no float32 copy of " + nd.name + " where its layer writes it");
    return buffer(fp32, shape);
  };
  auto store = [&](const Node& nd, int stored, const Tensor& written) {
    if (plan_.stores_16bit(nd.value) && !as_stored(nd)) backend_.to_16bit(written, memory_.address(stored), plan_.values);
  };
  auto context = [&](int id, int workspace, Tensor output) {
    LayerContext c;
    c.backend = &backend_;
    c.batch = n;
    c.training = training;
    c.step = slots_.scalars;
    c.node = id;
    c.inputs = inputs;
    c.output = output;
    c.params = params_.params(id);
    c.grads = params_.grads(id);
    c.saved = saved;
    c.cross_rank = slots_.cross_rank;
    if (workspace >= 0)
      c.workspace = Workspace{memory_.address(workspace), plan_.requests[static_cast<std::size_t>(workspace)].bytes};
    return c;
  };

  // Notes [BatchNorm and ReLU in one pass] and [BatchNorm, add and ReLU in one pass]
  // (step_plan.cpp): the ReLU and the add a layer runs, 0 where none; synchronised BatchNorm keeps
  // its own calls. residual_of: which of a fused add's two inputs is the residual, the one that is
  // not its BatchNorm's output.
  const bool fuse = !slots_.cross_rank && !plan_.fused_relu.empty();
  auto relu_run_by = [&](int id) { return fuse ? plan_.fused_relu[static_cast<std::size_t>(id)] : 0; };
  auto add_run_by = [&](int id) { return fuse ? plan_.fused_add[static_cast<std::size_t>(id)] : 0; };
  auto runs_within = [&](int id) { return fuse && plan_.fused_into[static_cast<std::size_t>(id)] != 0; };
  // Note [A convolution and its ReLU in one pass]: a ReLU whose forward its convolution runs.
  auto forward_within = [&](int id) { return runs_within(id) || plan_.forward_runs_within(id); };
  auto residual_of = [&](int add, int id) { return net_.node(add).inputs[0] == id ? std::size_t{1} : std::size_t{0}; };

  for (int id = 1; id <= L; ++id) {
    const int t = plan_.forward_time(id);
    memory_.begin(t);
    const Node& nd = net_.node(id);
    if (!nd.layer->is_view() && !forward_within(id)) {
      const NodeBuffers& b = plan_.node(id);
      gather(nd, id, false, -1, b.forward_inputs_fp32, true);
      const int add = add_run_by(id);
      if (add) inputs.push_back(readable(net_.node(add).inputs[residual_of(add, id)], n, false, -1, true, true));
      const Tensor output = writable(id, b.value, b.forward_output_fp32);
      LayerContext c = context(id, b.forward_workspace, output);
      c.training = training && net_.runs_in_training(id);  // Network::set_frozen_mode
      if (add) nd.layer->forward_then_add_relu(c);
      else if (relu_run_by(id) || plan_.relu_in_forward_of(id)) nd.layer->forward_then_relu(c);
      else nd.layer->forward(c);
      store(nd, b.value, output);
    }
    memory_.end(t);
  }

  memory_.begin(plan_.loss_time());
  const Workspace loss_ws =
      plan_.loss_workspace >= 0
          ? Workspace{memory_.address(plan_.loss_workspace), plan_.requests[static_cast<std::size_t>(plan_.loss_workspace)].bytes}
          : Workspace{};
  run_loss(backend_, net_.loss(), value(L, n), targets, slots_.weights, training ? gradient(L, n) : Tensor{},
           slots_.scalars, slots_.sums, loss_ws);
  if (logits) backend_.copy_to_host(value(L, n).data, logits, value(L, n).bytes());  // before its buffer may go
  memory_.end(plan_.loss_time());
  if (!training) return;

  std::fill(copies_.begin(), copies_.end(), -1);
  for (int t = plan_.loss_time() + 1; t < plan_.time_steps; ++t) {
    memory_.begin(t);
    const StepOp op = plan_.ops[static_cast<std::size_t>(t)];
    const int id = op.node;
    const Node& nd = net_.node(id);
    if (op.kind == StepOpKind::recompute) {
      const RecomputeBuffers& r = plan_.recomputations[static_cast<std::size_t>(t)];
      gather(nd, id, true, t, r.inputs_fp32, true);
      const Tensor output = writable(id, r.output, r.output_fp32);
      nd.layer->recompute(context(id, r.workspace, output));
      store(nd, r.output, output);
      copies_[static_cast<std::size_t>(id)] = t;
    } else if (!nd.layer->is_view() && !runs_within(id)) {
      const NodeBuffers& b = plan_.node(id);
      const int relu = relu_run_by(id);
      gather(nd, id, true, -1, b.backward_inputs_fp32, nd.layer->backward_needs_input());
      grad_inputs.clear();
      for (int in : nd.inputs) {
        Tensor g = gradient(in, n);  // empty for the network input, unless the layer must write one
        if (g.empty()) g = buffer(b.discarded_input_grad, batched(in, n));
        grad_inputs.push_back(g);
      }
      // A layer that runs a ReLU reads the ReLU's output, which the plan keeps until then.
      const Tensor output = relu ? readable(relu, n, true, -1, true, true)
                                 : readable(id, n, true, b.backward_output_fp32, nd.layer->backward_needs_output(),
                                            nd.layer->packed_values());
      const std::vector<bool>& acc = b.accumulate;
      std::copy(acc.begin(), acc.end(), accumulate_.get());
      std::size_t accumulated = acc.size();
      const int add = add_run_by(id);
      if (add) {  // the residual's gradient (empty where it wants none), as the add would write it
        const std::size_t k = residual_of(add, id);
        grad_inputs.push_back(gradient(net_.node(add).inputs[k], n));
        accumulate_[accumulated++] = plan_.node(add).accumulate[k];
      }
      LayerContext c = context(id, b.backward_workspace, output);
      c.grad_output = gradient(id, n);
      c.grad_inputs = grad_inputs;
      c.accumulate = std::span<const bool>(accumulate_.get(), accumulated);
      if (add) nd.layer->backward_through_add_relu(c);
      else if (relu) nd.layer->backward_through_relu(c);
      else nd.layer->backward(c);
      if (buckets) buckets->node_done(id);
    } else if (runs_within(id) && buckets) {
      buckets->node_done(id);
    }
    memory_.end(t);
  }
}

}  // namespace cnn
