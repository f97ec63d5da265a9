#include "cnnengine/engine/trainer.hpp"

#include <algorithm>
#include <cstddef>
#include <cmath>

#include "cnnengine/base/error.hpp"
#include "cnnengine/engine/detail/counter_rng.hpp"
#include "cnnengine/memory/bytes.hpp"

namespace cnn {
namespace {

constexpr std::size_t kMetricsBytes = kTrainerMetricsBytes;
// The loss and accuracy sums are zeroed and read back as two adjacent floats at the block's start.
static_assert(offsetof(TrainerSlots, loss_sum) == 0 && offsetof(TrainerSlots, correct) == sizeof(float));

int ceil_div(int a, int b) { return (a + b - 1) / b; }

}  // namespace

TrainingDiverged::TrainingDiverged(long step, double loss)
    : Error("training diverged at step " + std::to_string(step) + ": the loss is " +
                         std::to_string(loss) + " (try a smaller learning rate); the step was not applied"),
      step_(step), loss_(loss) {}

BatchPlanOptions planning_options(const TrainerOptions& options) {
  BatchPlanOptions planning = options;
  planning.optimizer_slots = make_optimizer(options.optimizer)->state_slots();
  planning.extra_persistent = kMetricsBytes;
  return planning;
}

Trainer::Trainer(Network& network, Backend& backend, memory::MemoryResource& resource, TrainerOptions options)
    : net_(network), backend_(backend), resource_(resource), options_(std::move(options)) {
  if (options_.capture_graphs) {
    if (options_.step_allocator)
      throw ConfigError("recording steps as graphs needs the planned strategy: other strategies move buffers between steps");
    if (const std::string why = backend_.capture_support(); !why.empty())
      throw ConfigError("recording steps as graphs: " + why);
    capture_ = true;
  }
  optimizer_ = make_optimizer(options_.optimizer);
  validate(options_.schedule);
  planner_ = std::make_unique<BatchPlanner>(net_, backend_, planning_options(options_));

  const int b = planner_->choose();
  if (b == 0) {
    const int asked = planner_->asked_micro_batch();
    const MemoryBreakdown smallest = breakdown(asked > 0 ? asked : planner_->smallest_micro_batch());
    memory::OutOfMemoryDetails details;
    details.requested = smallest.total();
    details.limit = options_.memory_budget;
    details.resource = "budget";
    throw BudgetTooSmall("the memory budget of " + memory::format_bytes(options_.memory_budget) +
                             " cannot hold this network at micro-batch " + std::to_string(smallest.micro_batch) +
                             " (it needs " + memory::format_bytes(smallest.total()) + "):\n" +
                             format_memory_table(smallest),
                         details);
  }
  params_ = std::make_unique<ParameterStore>(net_, backend_, resource_, optimizer_->state_slots(), options_.seed);
  metrics_ = memory::Buffer(resource_, kMetricsBytes, memory::Category::other);
  target_micro_batch_ = b;
  // The plan fits the budget, but the device may hold less than it (another process): halve
  // as a step would.
  build_fitting(b);
}

Trainer::~Trainer() { release_step_memory(); }

long Trainer::graph_replays() const {
  long replays = replays_before_rebuild_;
  if (executor_) replays += executor_->graph_replays();
  if (eval_executor_) replays += eval_executor_->graph_replays();
  return replays;
}

StepSlots Trainer::slots() const {
  auto* slots = static_cast<TrainerSlots*>(metrics_.data());
  return StepSlots{Tensor{&slots->loss_sum, Shape{1}}, Tensor{&slots->correct, Shape{1}}, &slots->scalars};
}

void Trainer::check_capture() {
  if (!capture_) return;
  for (StepExecutor* failed : {executor_.get(), eval_executor_.get()}) {
    if (!failed || failed->capture_failure().empty()) continue;
    capture_ = false;  // and the executors built from now on run eagerly
    executor_->stop_capturing();
    eval_executor_->stop_capturing();
    if (on_recovery)
      on_recovery("step " + std::to_string(steps_ + 1) + ": recording the step as a graph failed (" +
                  failed->capture_failure() + "); running without graphs");
    return;
  }
}

void Trainer::release_step_memory() {
  replays_before_rebuild_ = graph_replays();
  executor_.reset();
  eval_executor_.reset();
  memory_.reset();  // a dynamic step memory frees what a failed step still held
  eval_memory_.reset();
  arena_.release();
}

void Trainer::build(int micro_batch) {
  release_step_memory();
  micro_batch_ = micro_batch;
  try {
    MicroBatchPlan planned = planner_->plan(micro_batch);
    breakdown_ = planned.breakdown;
    plan_ = std::make_unique<StepPlan>(std::move(planned.training));
    eval_plan_ = std::make_unique<StepPlan>(std::move(planned.inference));
    if (options_.step_allocator) {
      memory_ = std::make_unique<DynamicStepMemory>(*plan_, *options_.step_allocator);
      eval_memory_ = std::make_unique<DynamicStepMemory>(*eval_plan_, *options_.step_allocator);
    } else {
      arena_ = memory::Buffer(resource_, std::max(plan_->arena_bytes(), eval_plan_->arena_bytes()),
                              memory::Category::activations);
      memory_ = std::make_unique<PlannedStepMemory>(*plan_, arena_.data());
      eval_memory_ = std::make_unique<PlannedStepMemory>(*eval_plan_, arena_.data());
    }
    executor_ = std::make_unique<StepExecutor>(net_, backend_, *params_, *plan_, *memory_, slots(), capture_);
    eval_executor_ = std::make_unique<StepExecutor>(net_, backend_, *params_, *eval_plan_, *eval_memory_, slots(), capture_);
  } catch (...) {  // no half-built step: the next call builds again
    release_step_memory();
    throw;
  }
}

int Trainer::build_fitting(int micro_batch) {
  const int smallest = planner_->smallest_micro_batch();
  for (;;) {
    try {
      build(micro_batch);
      return micro_batch;
    } catch (const memory::OutOfMemory& error) {
      if (micro_batch <= smallest)
        throw memory::OutOfMemory("cannot reserve the step memory even at micro-batch " + std::to_string(micro_batch) +
                                      ": " + error.what() + "\n" + format_memory_table(breakdown(micro_batch)),
                                  error.details());
      micro_batch = std::max(smallest, micro_batch / 2);
    }
  }
}

void Trainer::ensure_built() {
  if (!executor_) build_fitting(micro_batch_);
}

void Trainer::maybe_regrow() {
  const int b = micro_batch_;
  if (b >= target_micro_batch_ || options_.regrow_after_steps <= 0 ||
      good_steps_since_recovery_ < options_.regrow_after_steps)
    return;
  good_steps_since_recovery_ = 0;
  const int got = build_fitting(std::min(target_micro_batch_, 2 * b));
  if (got > b && on_recovery)
    on_recovery("step " + std::to_string(steps_ + 1) + ": micro-batch back up from " + std::to_string(b) + " to " +
                std::to_string(got));
}

void Trainer::check_labels(const HostBatch& batch) const {
  const int classes = net_.num_classes();
  for (int i = 0; i < batch.size; ++i)
    if (batch.labels[i] < 0 || batch.labels[i] >= classes)
      throw DataError("label " + std::to_string(batch.labels[i]) + " of sample " + std::to_string(i) +
                      " is outside the " + std::to_string(classes) + " classes of the network");
}

int Trainer::run_micro_batches(const HostBatch& batch, bool training) {
  const std::size_t sample = net_.input_shape().elements();
  StepExecutor& executor = training ? *executor_ : *eval_executor_;
  // One seed for the whole optimizer step: with each micro-batch's offset in the batch, dropout
  // masks do not depend on the micro-batch size, so a replay at a smaller one gives the same result.
  const std::uint64_t seed = splitmix64(options_.seed ^ splitmix64(static_cast<std::uint64_t>(steps_)));
  const float grad_scale = training ? 1.0f / static_cast<float>(batch.size) : 0.f;
  // Training micro-batches keep to the network's need (BatchNorm on one value per channel).
  const MicroBatchSplit split =
      split_into_micro_batches(batch.size, micro_batch_, training ? planner_->training_batch_need().samples : 1);
  for (int j = 0, first = 0; j < split.count; first += split.size(j), ++j)
    executor.run(MicroBatch{batch.images + static_cast<std::size_t>(first) * sample, batch.labels + first,
                            split.size(j), first},
                 grad_scale, seed);
  check_capture();
  return split.count;
}

StepReport Trainer::train_step(const HostBatch& batch) {
  if (batch.size <= 0) throw ConfigError("train_step: empty batch");
  const TrainingBatchNeed& need = planner_->training_batch_need();
  if (batch.size < need.samples)
    throw ConfigError("train_step: a batch of " + std::to_string(batch.size) + " cannot train this network: " +
                      need.why);
  // Only a trainer planned for batches of 2 (micro-batch 2, below 2 x 2 - 1) meets a batch it
  // cannot split: an odd one larger than 2.
  if (ceil_div(batch.size, micro_batch_) * need.samples > batch.size)
    throw ConfigError("train_step: a batch of " + std::to_string(batch.size) +
                      " does not split into micro-batches of " + std::to_string(need.samples) + " to " +
                      std::to_string(micro_batch_) + " samples (this trainer was planned for batches of " +
                      std::to_string(options_.batch) + "): " + need.why);
  check_labels(batch);
  ensure_built();
  maybe_regrow();
  params_->save_state();
  int micro_batches = 0;
  for (;;) {
    params_->zero_gradients();
    backend_.fill(Tensor{metrics_.floats(), Shape{2}}, 0.f);
    try {
      micro_batches = run_micro_batches(batch, true);
      ++good_steps_since_recovery_;
      break;
    } catch (const memory::OutOfMemory& error) {
      // Discard the partial gradients and state updates, halve the micro-batch and replay the
      // same samples.
      params_->restore_state();
      shrink_after(error, "step " + std::to_string(steps_ + 1));
    } catch (...) {
      // Any other failure: leave the parameters and state as they were before the step, and no
      // buffers held, then report it.
      params_->restore_state();
      params_->zero_gradients();
      release_step_memory();
      throw;
    }
  }
  float host[2];
  backend_.copy_to_host(metrics_.data(), host, sizeof host);
  if (!std::isfinite(host[0])) {
    // No optimizer step on a NaN or infinite loss: undo what the forward passes changed.
    params_->restore_state();
    params_->zero_gradients();
    throw TrainingDiverged(steps_ + 1, host[0]);
  }
  const float lr = scheduled_rate(options_.schedule, options_.optimizer.learning_rate, steps_, options_.total_steps);
  optimizer_->step(backend_, *params_, lr);
  ++steps_;
  StepReport r;
  r.step = steps_;
  r.samples = batch.size;
  r.loss = host[0] / batch.size;
  r.accuracy = host[1] / batch.size;
  r.learning_rate = lr;
  r.micro_batch = micro_batch_;
  r.micro_batches = micro_batches;
  return r;
}

void Trainer::shrink_after(const memory::OutOfMemory& error, const std::string& where) {
  const int b = micro_batch_;
  const int smallest = planner_->smallest_micro_batch();
  if (b <= smallest) {  // nothing left to halve
    release_step_memory();
    throw memory::OutOfMemory(where + ": out of memory at micro-batch " + std::to_string(b) +
                                  ", the smallest planned for this network: " + error.what() + "\n" +
                                  format_memory_table(breakdown(b)),
                              error.details());
  }
  good_steps_since_recovery_ = 0;
  const int smaller = build_fitting(std::max(smallest, b / 2));
  if (on_recovery)
    on_recovery(where + ": out of memory at micro-batch " + std::to_string(b) + " (" + error.what() +
                "); replaying it at micro-batch " + std::to_string(smaller));
}

EvalResult Trainer::evaluate(const NextBatch& next) {
  ensure_built();
  EvalResult result;
  double loss_sum = 0, correct = 0;
  long batches = 0;
  while (auto batch = next()) {
    if (batch->size <= 0) continue;
    check_labels(*batch);
    ++batches;
    // Each batch's sums are read back on their own, so that a batch replayed after an
    // out-of-memory failure at a smaller micro-batch counts once.
    for (;;) {
      backend_.fill(Tensor{metrics_.floats(), Shape{2}}, 0.f);
      try {
        run_micro_batches(*batch, false);
        break;
      } catch (const memory::OutOfMemory& error) {
        shrink_after(error, "evaluation batch " + std::to_string(batches));
      } catch (...) {
        release_step_memory();  // a dynamic step memory may still hold buffers
        throw;
      }
    }
    float host[2];
    backend_.copy_to_host(metrics_.data(), host, sizeof host);
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
