#include <cnnengine/engine/train/trainer.hpp>

#include <cmath>
#include <cstddef>
#include <functional>
#include <vector>

#include <cnnengine/engine/core/backend.hpp>
#include "engine/core/detail/evaluator.hpp"
#include "engine/core/detail/input_stager.hpp"
#include "engine/plan/micro_batch_recovery.hpp"
#include "engine/train/detail/loss_scaler.hpp"
#include "engine/train/detail/replicas.hpp"
#include "engine/train/detail/step_resources.hpp"
#include "engine/train/detail/trainer_slots.hpp"
#include "engine/train/planning_options.hpp"
#include "memory/buffer.hpp"
#include <cnnengine/memory/memory_resource.hpp>

namespace cnn {

std::string graph_capture_blocked(const TrainerOptions& options) {
  if (options.memory_strategy != memory::Strategy::planned)
    return "it needs the planned strategy (`memory_strategy`): other strategies move buffers between steps";
  if (options.sync_batchnorm)
    return "synchronised BatchNorm (`sync_batchnorm`) sums over the ranks inside forward and backward, which a "
           "recorded graph cannot";
  return {};
}

std::string graph_capture_blocked(const TrainerOptions& options, const Backend& backend) {
  if (std::string why = backend.capture_support(); !why.empty()) return why;
  return graph_capture_blocked(options);
}

memory::MemoryOptions memory_options(const TrainerOptions& options) {
  memory::MemoryOptions memory;
  memory.budget = options.memory_budget;
  memory.strategy = options.memory_strategy;
  memory.trace = options.memory_trace;
  memory.arena_factor = options.arena_factor;
  return memory;
}

TrainerOptions with_memory_options(TrainerOptions options, const memory::MemoryOptions& memory) {
  options.memory_budget = memory.budget;
  options.memory_strategy = memory.strategy;
  options.memory_trace = memory.trace;
  options.arena_factor = memory.arena_factor;
  return options;
}

memory::MemoryStack memory_stack_for(Backend& backend, const TrainerOptions& options) {
  return memory_stack_for(backend, memory_options(options));
}

memory::MemoryStack memory_stack_for(Backend& backend, const memory::MemoryOptions& options) {
  return memory::MemoryStack(backend.device_memory(), backend.staging_memory(), options);
}

Trainer::Trainer(Network& network, Backend& backend, TrainerOptions options)
    : Trainer(network, backend, backend.device_memory(), std::move(options)) {}

Trainer::Trainer(Network& network, Backend& backend, memory::MemoryResource& upstream, TrainerOptions options)
    : net_(network), backend_(backend), options_(std::move(options)),
      own_stack_(std::make_unique<memory::MemoryStack>(upstream, backend.staging_memory(), memory_options(options_))),
      stack_(own_stack_.get()) {
  start();
}

Trainer::Trainer(Network& network, Backend& backend, memory::MemoryStack& stack, TrainerOptions options)
    : net_(network), backend_(backend), options_(with_memory_options(std::move(options), stack.options())),
      stack_(&stack) {
  start();
}

Trainer::~Trainer() = default;

void Trainer::start() {
  graphs_off_because_ = options_.capture_graphs == GraphCapture::never ? "turned off"
                                                                        : graph_capture_blocked(options_, backend_);
  if (options_.capture_graphs == GraphCapture::always && !graphs_off_because_.empty())
    throw ConfigError("recording steps as graphs: " + graphs_off_because_);
  capture_ = graphs_off_because_.empty();
  if (net_.size() <= 1) throw ConfigError("the network has no layers: nothing to train");
  net_.check_loss();
  if (options_.regrow_after_steps < 0)
    throw ConfigError("regrow_after_steps must be 0 (never) or more, got " + std::to_string(options_.regrow_after_steps));
  if (options_.total_steps < 0)
    throw ConfigError("total_steps must be 0 (unknown) or more, got " + std::to_string(options_.total_steps));
  Replicas::check(options_, backend_);
  optimizer_ = make_optimizer(options_.optimizer);
  validate(options_.schedule);
  validate(options_.loss_scale);
  if (backend_.precision() == Precision::fp16 && options_.loss_scale.enabled)
    scaler_ = std::make_unique<LossScaler>(options_.loss_scale);
  // One account of the budget, the stack's: what the libraries and the communicator hold is set
  // aside there, and the plan leaves room for the loaders' staging it counts, staged or booked.
  // The backend's workspace queries take their scratch (cuDNN's measurements) from its memory too.
  const AccountSetAside aside = trainer_set_aside(options_, net_, backend_);
  planner_ = std::make_unique<BatchPlanner>(
      net_, backend_,
      planning_options(options_, net_, backend_, stack_->settle_account(aside.libraries, aside.communication)),
      &stack_->blocks());
  planned_nodes_ = net_.size();

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
  params_ = std::make_unique<ParameterStore>(net_, backend_, stack_->blocks(), optimizer_->state_slots(), options_.seed,
                                             ParameterStore::state_copies_for(backend_));
  slots_ = std::make_unique<memory::Buffer>(stack_->blocks(), trainer_slots_bytes(net_.loss()), memory::Category::other);
  const LossOptions& loss = net_.loss();
  const auto weight_count = static_cast<int>(loss_weight_floats(loss));
  if (weight_count)
    backend_.copy_to_device((loss.task == Task::segment ? loss.class_weights : loss.positive_weights).data(),
                            loss_weights(static_cast<TrainerSlots*>(slots_->data())),
                            static_cast<std::size_t>(weight_count) * sizeof(float));
  input_ = std::make_unique<InputStager>(backend_, *stack_, net_.input_shape().elements(), net_.target_bytes(), b);
  overlapped_ = input_->overlapped() && !options_.communicator && !scaler_;
  if (!stack_->step_buffers_built()) {
    const MemoryBreakdown full = breakdown(options_.batch);
    try {
      stack_->build_step_buffers(planner_->bytes_outside_arena(full), full.arena_bytes);
    } catch (const memory::OutOfMemory& error) {
      throw BudgetTooSmall(std::string(error.what()) + ":\n" + format_memory_table(full), error.details());
    }
  }
  auto* slots = static_cast<TrainerSlots*>(slots_->data());
  StepSlots step_slots{&slots->sums.loss,
                       weight_count ? Tensor{loss_weights(slots), Shape{weight_count}} : Tensor{}, &slots->scalars,
                       input_.get()};
  if (options_.communicator) {
    replicas_ = std::make_unique<Replicas>(net_, backend_, *params_, stack_->blocks(), options_);
    step_slots.cross_rank = replicas_->cross_rank();
  }
  step_ = std::make_unique<StepResources>(net_, backend_, *params_, *planner_, *stack_, step_slots, capture_);
  recovery_ = std::make_unique<MicroBatchRecovery>(*step_, b, planner_->smallest_micro_batch(),
                                                   options_.regrow_after_steps, &on_recovery);
  // The plan fits the budget, but the device may hold less than it (another process): halve
  // as a step would.
  recovery_->build_fitting(b);
  if (synchronised_batchnorm()) {
    agree_micro_batch();
    // No growing back: a rank alone cannot, and the others would follow it down each step. The
    // target stays the plan's, so that a restored state may ask for it (the ranks then agree).
    recovery_->stop_regrowing();
  }
}

bool Trainer::synchronised_batchnorm() const { return replicas_ && replicas_->synchronised_batchnorm(); }

// Note [Synchronised micro-batches] (replicas.cpp) says why and when.
void Trainer::agree_micro_batch() {
  replicas_->agree_micro_batch(micro_batch(), [this](int smallest) { return recovery_->build_fitting(smallest); });
}

int Trainer::rank() const { return replicas_ ? replicas_->rank() : 0; }
int Trainer::ranks() const { return replicas_ ? replicas_->ranks() : 1; }

void Trainer::synchronize_replicas() {
  if (replicas_) replicas_->synchronize();
}

MemoryBreakdown Trainer::breakdown(int micro_batch) const { return planner_->breakdown(micro_batch); }

const MemoryBreakdown& Trainer::memory() const { return step_->breakdown(); }

int Trainer::micro_batch() const { return recovery_ ? recovery_->micro_batch() : 0; }

TrainerState Trainer::state() const {
  if (pending_)
    throw ConfigError("state: step " + std::to_string(pending_->report.step) + " is pending (its loss unread): drain() it first");
  TrainerState state{steps_, micro_batch(), recovery_->good_steps(), learning_rate_scale_};
  if (scaler_) {
    state.loss_scale = scaler_->scale();
    state.loss_scale_steps = scaler_->steps_at_scale();
  }
  state.skipped_steps = skipped_steps_;
  return state;
}

float Trainer::loss_scale() const { return scaler_ ? scaler_->scale() : 0.f; }

float Trainer::learning_rate() const {
  return scheduled_rate(options_.schedule, options_.optimizer.learning_rate, steps_, options_.total_steps) *
         learning_rate_scale_;
}

void Trainer::set_learning_rate_scale(float scale) {
  if (!std::isfinite(scale) || scale <= 0)
    throw ConfigError("the learning rate's scale must be a finite number above 0, not " + std::to_string(scale));
  learning_rate_scale_ = scale;
}

void Trainer::restore(const TrainerState& state) {
  if (pending_)
    throw ConfigError("restore: step " + std::to_string(pending_->report.step) + " is pending: drain() it first");
  if (!std::isfinite(state.learning_rate_scale) || state.learning_rate_scale <= 0)
    throw ConfigError("cannot continue with a learning-rate scale of " + std::to_string(state.learning_rate_scale) +
                      ": it must be a finite number above 0");
  if (state.skipped_steps < 0 || state.skipped_steps > state.steps)
    throw ConfigError("cannot continue with " + std::to_string(state.skipped_steps) + " skipped steps of " +
                      std::to_string(state.steps));
  if (!std::isfinite(state.loss_scale) || state.loss_scale < 0)  // 0: none kept
    throw ConfigError("cannot continue with a loss scale of " + std::to_string(state.loss_scale) +
                      ": it must be a finite number, 0 where none was kept");
  // A state kept without scaling (fp32, bf16) starts at the initial scale.
  LossScaler scaler(options_.loss_scale);
  if (scaler_ && state.loss_scale > 0) scaler.restore(state.loss_scale, state.loss_scale_steps);
  if (state.steps < 0 || state.good_steps < 0 || state.micro_batch < recovery_->smallest() ||
      state.micro_batch > recovery_->target())
    throw ConfigError("cannot continue at step " + std::to_string(state.steps) + " with micro-batch " +
                      std::to_string(state.micro_batch) + ": this trainer runs micro-batches of " +
                      std::to_string(recovery_->smallest()) + " to " + std::to_string(recovery_->target()));
  steps_ = state.steps;
  learning_rate_scale_ = state.learning_rate_scale;
  skipped_steps_ = state.skipped_steps;
  if (scaler_) *scaler_ = scaler;
  recovery_->set_good_steps(state.good_steps);
  if (state.micro_batch != micro_batch()) recovery_->build_fitting(state.micro_batch);
}

long Trainer::graph_replays() const { return step_ ? step_->graph_replays() : 0; }

Tensor Trainer::metric_sums() const { return Tensor{slots_->floats(), Shape{kLossSumFloats}}; }

void Trainer::ensure_built(const char* call) {
  if (!params_) throw ConfigError(std::string(call) + ": this trainer has finished (finish() gave its memory back)");
  if (net_.size() != planned_nodes_)
    throw ConfigError(std::string(call) + ": the network has " + std::to_string(net_.size() - 1) + " layers, " +
                      std::to_string(planned_nodes_ - 1) + " when this trainer planned it: build a trainer for it");
  if (!step_->built()) recovery_->rebuild();
}

ParameterStore& Trainer::parameters() {
  if (!params_) throw ConfigError("parameters: this trainer has finished (finish() gave its memory back)");
  return *params_;
}

EvalResult Trainer::evaluate(const NextBatch& next) { return run_evaluation(next, false); }

ClassEvaluation Trainer::evaluate_classes(const NextBatch& next) { return run_evaluation(next, true); }

ClassEvaluation Trainer::run_evaluation(const NextBatch& next, bool confusion) {
  ensure_built("evaluate");
  settle();  // a pending step's loss is checked before anything reads what it changed
  const std::size_t per_sample = net_.output_shape().elements();
  std::vector<float> outputs;  // a micro-batch's, where the counts want them
  long batches = 0;
  // Called through std::ref: a std::function over a reference allocates nothing.
  auto passes = [&](const Batch& batch, BatchCounts& counts) {
    ++batches;
    auto count = [&](int first, int n) { counts.add_outputs(batch, first, n, outputs.data()); };
    std::function<void(int, int)> each;
    if (counts.wants_outputs()) each = std::ref(count);
    for (;;) {
      backend_.fill(metric_sums(), 0.f);
      if (each) outputs.resize(static_cast<std::size_t>(micro_batch()) * per_sample);
      try {
        run_micro_batches(batch, false, each ? outputs.data() : nullptr, each);
        break;
      } catch (const memory::OutOfMemory& error) {
        counts.restart();
        recovery_->shrink_after(error, "evaluation batch " + std::to_string(batches));
      } catch (...) {
        step_->release();  // a dynamic step memory may still hold buffers
        throw;
      }
    }
    float host[kLossSumFloats];
    backend_.copy_to_host(slots_->data(), host, sizeof host);
    return BatchSums{host[0], host[1], host[2]};
  };
  SumOverRanks sum_over_ranks;
  if (replicas_) sum_over_ranks = [this](std::vector<double>& totals) { replicas_->sum(totals); };
  return evaluate_batches(net_, next, confusion, std::ref(passes), sum_over_ranks);
}

void Trainer::finish() {
  backend_.synchronize();
  pending_.reset();
  step_->release();
  if (slots_) slots_->release();
  input_.reset();
  params_.reset();
  stack_->release_step_buffers();
  stack_->finish_trace();
}

}  // namespace cnn
