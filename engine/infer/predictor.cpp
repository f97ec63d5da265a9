#include "engine/infer/predictor.hpp"

#include <algorithm>
#include <cstdint>
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
  net_.check_loss();
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
  slots_ = std::make_unique<memory::Buffer>(stack_->blocks(), forward_slots_bytes(net_.loss()), memory::Category::other);
  if (const std::size_t count = loss_weight_floats(net_.loss())) {
    const LossOptions& loss = net_.loss();
    const std::vector<float>& weights = loss.task == Task::segment ? loss.class_weights : loss.positive_weights;
    backend_.copy_to_device(weights.data(), loss_weights(static_cast<ForwardSlots*>(slots_->data())),
                            count * sizeof(float));
  }
  reserve(b);
}

void Predictor::reserve(int b) {
  for (;;) {
    try {
      plan_ = std::make_unique<InferencePlan>(plan_inference(*planner_, b));
      input_ = std::make_unique<InputStager>(backend_, *stack_, net_.input_shape().elements(), net_.target_bytes(), b);
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
  const std::size_t target_bytes = static_cast<std::size_t>(b) * net_.target_bytes();
  zero_targets_.assign((target_bytes + sizeof(std::int32_t) - 1) / sizeof(std::int32_t), 0);
  const std::size_t per_sample = net_.output_shape().elements();
  batch_logits_.resize(net_.task() == Task::classify ? static_cast<std::size_t>(b) * per_sample : per_sample);
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

EvalResult Predictor::evaluate(const NextBatch& next) { return run_evaluation(next, nullptr); }

ClassEvaluation Predictor::evaluate_classes(const NextBatch& next) {
  ClassEvaluation result;
  if (net_.task() != Task::classify) {  // no confusion of samples: the task's scores instead
    static_cast<EvalResult&>(result) = run_evaluation(next, nullptr);
    return result;
  }
  const auto classes = static_cast<std::size_t>(net_.num_classes());
  result.confusion.assign(classes, std::vector<std::size_t>(classes, 0));
  static_cast<EvalResult&>(result) = run_evaluation(next, &result);
  return result;
}

EvalResult Predictor::run_evaluation(const NextBatch& next, ClassEvaluation* classes) {
  if (!next) throw ConfigError("evaluate: no source of batches (an empty NextBatch)");
  EvalResult result;
  const LossOptions& loss = net_.loss();
  TaskMetrics metrics(loss.task, net_.num_classes(), loss.threshold);
  const bool scored = loss.task != Task::classify;
  double loss_sum = 0, correct = 0, counted = 0;
  const std::size_t sample = net_.input_shape().elements();
  const std::size_t outputs = net_.output_shape().elements();
  const std::size_t target_bytes = net_.target_bytes();
  const int height = loss.task == Task::segment ? net_.input_shape()[1] : 1;
  const int width = loss.task == Task::segment ? net_.input_shape()[2] : 1;
  const int b = micro_batch();
  auto* slots = static_cast<ForwardSlots*>(slots_->data());
  const Tensor sums{&slots->sums.loss, Shape{kLossSumFloats}};
  while (auto batch = next()) {
    if (batch->size <= 0) continue;
    if (batch->on_device) throw ConfigError("evaluate: a batch in device memory (Batch::on_device) trains only");
    check_batch_inputs(*batch, net_.input_shape(), "evaluate");
    check_batch_targets(*batch, net_);
    // Each batch's sums are read back on their own, in float as a trainer's, then added up in double.
    backend_.fill(sums, 0.f);
    for (int first = 0; first < batch->size; first += b) {
      const int n = std::min(b, batch->size - first);
      Batch part{.images = batch->images + static_cast<std::size_t>(first) * sample, .size = n,
                 .first = batch->first + first};
      if (scored)
        part.targets = static_cast<const char*>(batch->targets) + static_cast<std::size_t>(first) * target_bytes;
      else
        part.labels = batch->labels + first;
      pass_->run(part, true, classes ? batch_logits_.data() : nullptr);
      if (classes) count_predictions(classes->confusion, batch_logits_.data(), part.labels, n);
      if (scored) {
        // One sample's output on the host at a time: a segmentation's is a class score a pixel.
        const Tensor out = pass_->output(n);
        for (int i = 0; i < n; ++i) {
          backend_.copy_to_host(out.data + static_cast<std::size_t>(i) * outputs, batch_logits_.data(),
                                outputs * sizeof(float));
          metrics.add(batch_logits_.data(), static_cast<const char*>(part.targets) + static_cast<std::size_t>(i) * target_bytes,
                      height, width);
        }
      }
    }
    float host[kLossSumFloats];
    backend_.copy_to_host(slots_->data(), host, sizeof host);
    loss_sum += host[0];
    correct += host[1];
    counted += host[2];
    result.samples += static_cast<std::size_t>(batch->size);
  }
  if (result.samples) {
    result.loss = loss_sum / static_cast<double>(result.samples);
    const double over = counted_over(loss.task, counted, result.samples);
    result.accuracy = loss.task == Task::regress || over == 0 ? 0.0 : correct / over;
  }
  result.scores = metrics.scores();
  return result;
}

}  // namespace cnn
