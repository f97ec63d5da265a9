#include <cnnengine/engine/infer/predictor.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>

#include <cnnengine/base/error.hpp>
#include "engine/core/detail/batch_checks.hpp"
#include "engine/core/detail/evaluator.hpp"
#include "engine/core/detail/input_stager.hpp"
#include "engine/infer/detail/forward_pass.hpp"
#include "engine/infer/detail/forward_slots.hpp"
#include "engine/infer/detail/inference_plan.hpp"
#include "engine/infer/inference_planner.hpp"
#include "engine/plan/micro_batch_recovery.hpp"
#include "memory/buffer.hpp"
#include <cnnengine/memory/memory_resource.hpp>

namespace cnn {

class Predictor::ReservedMemory final : public MicroBatchMemory {
 public:
  explicit ReservedMemory(Predictor& p) : p_(p) {}
  void build(int b) override {
    try {
      p_.plan_ = std::make_unique<InferencePlan>(plan_inference(*p_.planner_, b));
      p_.input_ = std::make_unique<InputStager>(p_.backend_, *p_.stack_, p_.net_.input_shape().elements(),
                                                p_.net_.target_bytes(), b);
      p_.arena_ = std::make_unique<memory::Buffer>(p_.stack_->blocks(), p_.plan_->step.arena_bytes(),
                                                   memory::Category::activations);
    } catch (const memory::OutOfMemory&) {
      release();
      throw;
    }
  }
  void release() override {
    p_.pass_.reset();
    p_.arena_.reset();
    p_.input_.reset();
  }
  // The policy halves down to one image (its smallest here), so only there does it give up.
  std::string cannot_reserve(int) const override { return "cannot reserve the inference arena even for one image"; }
  std::string byte_table(int b) const override { return format_inference_table(p_.planner_->breakdown(b)); }

 private:
  Predictor& p_;
};

Predictor::Predictor(Network& network, Backend& backend, InferenceOptions options)
    : Predictor(network, backend, backend.device_memory(), options) {}

Predictor::Predictor(Network& network, Backend& backend, memory::MemoryResource& upstream, InferenceOptions options)
    : net_(network), backend_(backend), options_(options),
      own_stack_(std::make_unique<memory::MemoryStack>(
          upstream, backend.staging_memory(),
          memory::MemoryOptions{options.account.budget(), memory::Strategy::planned, {}})),
      stack_(own_stack_.get()) {
  start();
}

Predictor::Predictor(Network& network, Backend& backend, memory::MemoryStack& stack, InferenceOptions options)
    : net_(network), backend_(backend), options_(options), stack_(&stack) {
  start();
}

Predictor::~Predictor() {
  // Work enqueued by the last call may still read the arena.
  try {
    backend_.synchronize();
  } catch (...) {  // a failed device: nothing more to wait for
  }
}

void Predictor::start() {
  net_.check_loss();
  // One account of the budget, the stack's, as a trainer's: the libraries' workspaces set aside,
  // the loaders' staging (staged or booked) left room in the plan.
  options_.account = stack_->settle_account(backend_.library_reserved_bytes(), 0);
  planner_ = std::make_unique<InferencePlanner>(net_, backend_, options_, &stack_->blocks());
  const int b = planner_->largest_fitting();
  if (b == 0) {
    const MemoryBreakdown one = planner_->breakdown(1);
    memory::OutOfMemoryDetails details;
    details.requested = one.total();
    details.limit = options_.account.budget();
    details.resource = "budget";
    throw BudgetTooSmall("the memory budget of " + memory::format_bytes(options_.account.budget()) +
                             " cannot hold this network's inference even for one image (it needs " +
                             memory::format_bytes(one.total()) + "):\n" + format_inference_table(one),
                         details);
  }
  params_ = ParameterStore::for_inference(net_, backend_, stack_->blocks());
  slots_ = std::make_unique<memory::Buffer>(stack_->blocks(), forward_slots_bytes(net_.loss()), memory::Category::other);
  if (const std::size_t count = loss_weight_floats(net_.loss())) {
    const LossOptions& loss = net_.loss();
    const std::vector<float>& weights = loss.task == Task::segment ? loss.class_weights : loss.positive_weights;
    backend_.copy_to_device(weights.data(), loss_weights(static_cast<ForwardSlots*>(slots_->data())),
                            count * sizeof(float));
  }
  reserved_ = std::make_unique<ReservedMemory>(*this);
  const int built = MicroBatchRecovery(*reserved_, b, 1, 0).build_fitting(b);
  breakdown_ = plan_->breakdown;
  pass_ = std::make_unique<ForwardPass>(net_, backend_, *params_, plan_->step, arena_->data(),
                                        *static_cast<ForwardSlots*>(slots_->data()), *input_);
  const std::size_t target_bytes = static_cast<std::size_t>(built) * net_.target_bytes();
  zero_targets_.assign((target_bytes + sizeof(std::int32_t) - 1) / sizeof(std::int32_t), 0);
  const std::size_t per_sample = net_.output_shape().elements();
  batch_logits_.resize(net_.task() == Task::classify ? static_cast<std::size_t>(built) * per_sample : per_sample);
}

void Predictor::logits(const float* images, int count, float* logits) {
  if (count < 0) throw ConfigError("predict: " + std::to_string(count) + " images");
  if (count == 0) return;
  if (!logits) throw ConfigError("predict: nowhere to write the logits (null)");
  check_batch_inputs(Batch{images, zero_targets_.data(), count}, net_.input_shape(), "predict");
  const std::size_t sample = net_.input_shape().elements();
  const std::size_t outputs = net_.output_shape().elements();
  const bool labels = net_.task() == Task::classify;
  const int b = micro_batch();
  for (int first = 0; first < count; first += b) {
    const int n = std::min(b, count - first);
    Batch batch{.images = images + static_cast<std::size_t>(first) * sample, .size = n, .first = first};
    if (labels)
      batch.labels = zero_targets_.data();
    else
      batch.targets = zero_targets_.data();
    pass_->run(batch, false, logits + static_cast<std::size_t>(first) * outputs);
  }
}

EvalResult Predictor::evaluate(const NextBatch& next) { return run_evaluation(next, false); }

ClassEvaluation Predictor::evaluate_classes(const NextBatch& next) { return run_evaluation(next, true); }

ClassEvaluation Predictor::run_evaluation(const NextBatch& next, bool confusion) {
  const std::size_t sample = net_.input_shape().elements();
  const std::size_t outputs = net_.output_shape().elements();
  const std::size_t target_bytes = net_.target_bytes();
  const bool classify = net_.task() == Task::classify;
  const int b = micro_batch();
  auto* slots = static_cast<ForwardSlots*>(slots_->data());
  const Tensor sums{&slots->sums.loss, Shape{kLossSumFloats}};
  // Called through std::ref: a std::function over a reference allocates nothing.
  auto passes = [&](const Batch& batch, BatchCounts& counts) {
    backend_.fill(sums, 0.f);
    for (int first = 0; first < batch.size; first += b) {
      const int n = std::min(b, batch.size - first);
      Batch part{.images = batch.images + static_cast<std::size_t>(first) * sample, .size = n,
                 .first = batch.first + first};
      if (classify)
        part.labels = batch.labels + first;
      else
        part.targets = static_cast<const char*>(batch.targets) + static_cast<std::size_t>(first) * target_bytes;
      if (classify || !counts.wants_outputs()) {
        pass_->run(part, true, counts.wants_outputs() ? batch_logits_.data() : nullptr);
        if (counts.wants_outputs()) counts.add_outputs(batch, first, n, batch_logits_.data());
        continue;
      }
      pass_->run(part, true, nullptr);
      // One sample's output on the host at a time: a segmentation's is a class score a pixel.
      const Tensor out = pass_->output(n);
      for (int i = 0; i < n; ++i) {
        backend_.copy_to_host(out.data + static_cast<std::size_t>(i) * outputs, batch_logits_.data(),
                              outputs * sizeof(float));
        counts.add_outputs(batch, first + i, 1, batch_logits_.data());
      }
    }
    float host[kLossSumFloats];
    backend_.copy_to_host(slots_->data(), host, sizeof host);
    return BatchSums{host[0], host[1], host[2]};
  };
  return evaluate_batches(net_, next, confusion, std::ref(passes));
}

}  // namespace cnn
