#include "engine/infer/predictor.hpp"

#include <algorithm>
#include <string>

#include "base/error.hpp"
#include "engine/core/detail/batch_checks.hpp"
#include "engine/core/detail/input_stager.hpp"
#include "engine/infer/detail/forward_pass.hpp"
#include "engine/infer/detail/forward_slots.hpp"
#include "engine/infer/detail/inference_plan.hpp"
#include "engine/infer/inference_planner.hpp"
#include "memory/buffer.hpp"
#include "memory/memory_resource.hpp"

namespace cnn {

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
  // One account of the budget, the stack's, as a trainer's: the libraries' workspaces set aside,
  // the loaders' staging (staged or booked) left room in the plan.
  options_.account = stack_->settle_account(backend_.library_reserved_bytes(), 0);
  planner_ = std::make_unique<InferencePlanner>(net_, backend_, options_);
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
  slots_ = std::make_unique<memory::Buffer>(stack_->blocks(), sizeof(ForwardSlots), memory::Category::other);
  reserve(b);
}

void Predictor::reserve(int b) {
  for (;;) {
    try {
      plan_ = std::make_unique<InferencePlan>(plan_inference(*planner_, b));
      input_ = std::make_unique<InputStager>(backend_, *stack_, net_.input_shape().elements(), b);
      arena_ = std::make_unique<memory::Buffer>(stack_->blocks(), plan_->step.arena_bytes(), memory::Category::activations);
      break;
    } catch (const memory::OutOfMemory& error) {
      input_.reset();
      if (b == 1)
        throw memory::OutOfMemory("cannot reserve the inference arena even for one image: " +
                                      std::string(error.what()) + "\n" + format_inference_table(planner_->breakdown(1)),
                                  error.details());
      b /= 2;
    }
  }
  breakdown_ = plan_->breakdown;
  pass_ = std::make_unique<ForwardPass>(net_, backend_, *params_, plan_->step, arena_->data(),
                                        *static_cast<ForwardSlots*>(slots_->data()), *input_);
  zero_labels_.assign(static_cast<std::size_t>(b), 0);
  batch_logits_.resize(static_cast<std::size_t>(b) * static_cast<std::size_t>(net_.num_classes()));
}

void Predictor::logits(const float* images, int count, float* logits) {
  if (count < 0) throw ConfigError("predict: " + std::to_string(count) + " images");
  if (count == 0) return;
  if (!logits) throw ConfigError("predict: nowhere to write the logits (null)");
  check_batch_inputs(Batch{images, zero_labels_.data(), count}, net_.input_shape().elements(), "predict");
  const std::size_t sample = net_.input_shape().elements();
  const auto classes = static_cast<std::size_t>(net_.num_classes());
  const int b = micro_batch();
  for (int first = 0; first < count; first += b) {
    const int n = std::min(b, count - first);
    pass_->run(Batch{.images = images + static_cast<std::size_t>(first) * sample, .labels = zero_labels_.data(), .size = n,
                     .first = first},
               false, logits + static_cast<std::size_t>(first) * classes);
  }
}

EvalResult Predictor::evaluate(const NextBatch& next) { return run_evaluation(next, nullptr); }

ClassEvaluation Predictor::evaluate_classes(const NextBatch& next) {
  ClassEvaluation result;
  const auto classes = static_cast<std::size_t>(net_.num_classes());
  result.confusion.assign(classes, std::vector<std::size_t>(classes, 0));
  static_cast<EvalResult&>(result) = run_evaluation(next, &result);
  return result;
}

EvalResult Predictor::run_evaluation(const NextBatch& next, ClassEvaluation* classes) {
  if (!next) throw ConfigError("evaluate: no source of batches (an empty NextBatch)");
  EvalResult result;
  double loss_sum = 0, correct = 0;
  const std::size_t sample = net_.input_shape().elements();
  const int b = micro_batch();
  auto* slots = static_cast<ForwardSlots*>(slots_->data());
  const Tensor sums{&slots->loss_sum, Shape{2}};
  while (auto batch = next()) {
    if (batch->size <= 0) continue;
    if (batch->on_device) throw ConfigError("evaluate: a batch in device memory (Batch::on_device) trains only");
    check_batch_inputs(*batch, sample, "evaluate");
    check_batch_labels(*batch, net_.num_classes());
    // Each batch's sums are read back on their own, in float as a trainer's, then added up in double.
    backend_.fill(sums, 0.f);
    for (int first = 0; first < batch->size; first += b) {
      const int n = std::min(b, batch->size - first);
      const std::int32_t* labels = batch->labels + first;
      pass_->run(Batch{.images = batch->images + static_cast<std::size_t>(first) * sample, .labels = labels, .size = n,
                       .first = batch->first + first},
                 true, classes ? batch_logits_.data() : nullptr);
      if (classes) count_predictions(classes->confusion, batch_logits_.data(), labels, n);
    }
    float host[2];
    backend_.copy_to_host(slots_->data(), host, sizeof host);
    loss_sum += host[0];
    correct += host[1];
    result.samples += static_cast<std::size_t>(batch->size);
  }
  if (result.samples) {
    result.loss = loss_sum / static_cast<double>(result.samples);
    result.accuracy = correct / static_cast<double>(result.samples);
  }
  return result;
}

}  // namespace cnn
