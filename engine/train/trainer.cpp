#include "engine/train/trainer.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "base/batch.hpp"
#include "engine/core/backend.hpp"
#include "engine/core/detail/batch_checks.hpp"
#include "engine/core/detail/input_stager.hpp"
#include "engine/train/detail/gradient_buckets.hpp"
#include "engine/train/detail/loss_scaler.hpp"
#include "engine/train/detail/recovery.hpp"
#include "engine/train/detail/replicas.hpp"
#include "engine/train/detail/step_resources.hpp"
#include "engine/train/planning_options.hpp"
#include "memory/buffer.hpp"
#include "memory/memory_resource.hpp"

namespace cnn {
namespace {

// What the trainer keeps on the device beside the parameter store: the loss's sums and the
// micro-batch's scalars, at fixed addresses (a recorded step reads them there), then the loss's
// weights where it has any.
struct TrainerSlots {
  LossSums sums;
  StepScalars scalars;
  float gradients_not_finite;  // fp16's loss scaling (Backend::unscale_gradients)
};
// The sums are zeroed and read back as adjacent floats at the block's start.
static_assert(offsetof(TrainerSlots, sums) == 0 && sizeof(LossSums) == kLossSumFloats * sizeof(float));

std::size_t trainer_slots_bytes(const LossOptions& loss) {
  return sizeof(TrainerSlots) + loss_weight_floats(loss) * sizeof(float);
}
float* loss_weights(TrainerSlots* slots) { return reinterpret_cast<float*>(slots + 1); }

int ceil_div(int a, int b) { return (a + b - 1) / b; }

}  // namespace

namespace {

// What to try about a loss that is not finite. At the first step nothing has been applied: the
// learning rate cannot be the cause, the inputs or the starting weights are.
std::string divergence_advice(long step, Precision precision) {
  const bool first = step <= 1;
  if (precision == Precision::fp16)
    return std::string(" (half holds values up to 65504: a value between layers or a product's operand beyond that "
                       "is infinite; try bf16, which has float's range, ") +
           (first ? "or inputs on a smaller scale)" : "inputs on a smaller scale, or a smaller learning rate)");
  if (first)
    return " (at the first step, before any update: not the learning rate; the inputs or the starting weights give "
           "it: check the data's values and its normalisation)";
  return " (try a smaller learning rate)";
}

}  // namespace

TrainingDiverged::TrainingDiverged(long step, double loss, Precision precision)
    : TrainingDiverged(step, loss,
                       "training diverged at step " + std::to_string(step) +
                           (precision == Precision::fp16 ? " in fp16" : "") + ": the loss is " + std::to_string(loss) +
                           divergence_advice(step, precision) + "; the step was not applied") {}

TrainingDiverged::TrainingDiverged(const TrainingDiverged& diverged, const std::string& more)
    : TrainingDiverged(diverged.step(), diverged.loss(), diverged.what() + more) {}

TrainingDiverged::TrainingDiverged(long step, double loss, const std::string& message)
    : Error(message), step_(step), loss_(loss) {}

LossScaleAtFloor::LossScaleAtFloor(long step, double loss, float floor)
    : TrainingDiverged(step, loss,
                       "training diverged at step " + std::to_string(step) +
                           " in fp16: its gradients are NaN or infinite at the loss scale's floor (" +
                           std::to_string(floor) + "), the loss " + std::to_string(loss) +
                           " (try a smaller learning rate, or bf16, which has float's range); the step was not "
                           "applied") {}

BatchPlanOptions planning_options(const TrainerOptions& options, const Network& network, const Backend& backend) {
  BatchPlanOptions planning;
  planning.batch = options.batch;
  planning.micro_batch = options.micro_batch;
  planning.accumulate = options.accumulate;
  planning.account = memory::BudgetAccount(options.memory.budget);
  planning.strategy = options.memory.strategy;
  planning.workspace_limit = options.workspace_limit;
  planning.rewrite_graph = options.rewrite_graph;
  planning.recompute = options.recompute;
  planning.values = value_format(backend.precision());
  planning.narrow_values = options.narrow_values;
  std::size_t communication = 0;
  planning.optimizer_slots = make_optimizer(options.optimizer)->state_slots();
  planning.extra_persistent = trainer_slots_bytes(network.loss());
  if (const Communicator* c = options.communicator) {
    // A rank plans for its share of the batch: the largest one (share_of_batch).
    planning.batch = std::max(1, share_of_batch(options.batch, 0, c->ranks()).size);
    if (options.accumulate > 0) {  // k micro-batches per step on every rank
      planning.micro_batch = ceil_div(planning.batch, options.accumulate);
      planning.accumulate = 0;
    }
    communication = Replicas::communication_bytes(options, network);
    if (options.sync_batchnorm) planning.extra_persistent += Replicas::scratch_floats(network) * sizeof(float);
  }
  planning.account.set_aside(backend.library_reserved_bytes(), communication);
  return planning;
}

BatchPlanOptions planning_options(const TrainerOptions& options, const Network& network, const Backend& backend,
                                  const memory::MemoryStack& stack) {
  TrainerOptions on_stack = options;
  on_stack.memory = stack.options();
  BatchPlanOptions planning = planning_options(on_stack, network, backend);
  planning.account.add_loader_staging(stack.account().loader_staging());
  return planning;
}

memory::MemoryStack memory_stack_for(Backend& backend, const memory::MemoryOptions& options) {
  return memory::MemoryStack(backend.device_memory(), backend.staging_memory(), options);
}

Trainer::Trainer(Network& network, Backend& backend, TrainerOptions options)
    : Trainer(network, backend, backend.device_memory(), std::move(options)) {}

Trainer::Trainer(Network& network, Backend& backend, memory::MemoryResource& upstream, TrainerOptions options)
    : net_(network), backend_(backend), options_(std::move(options)),
      own_stack_(std::make_unique<memory::MemoryStack>(upstream, backend.staging_memory(), options_.memory)),
      stack_(own_stack_.get()) {
  start();
}

Trainer::Trainer(Network& network, Backend& backend, memory::MemoryStack& stack, TrainerOptions options)
    : net_(network), backend_(backend), options_(std::move(options)), stack_(&stack) {
  options_.memory = stack.options();
  start();
}

Trainer::~Trainer() = default;

void Trainer::start() {
  if (options_.capture_graphs) {
    if (options_.memory.strategy != memory::Strategy::planned)
      throw ConfigError("recording steps as graphs needs the planned strategy: other strategies move buffers between steps");
    if (const std::string why = backend_.capture_support(); !why.empty())
      throw ConfigError("recording steps as graphs: " + why);
    capture_ = true;
  }
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
  BatchPlanOptions planning = planning_options(options_, net_, backend_);
  planning.account = stack_->settle_account(planning.account.libraries(), planning.account.communication());
  planner_ = std::make_unique<BatchPlanner>(net_, backend_, planning);
  planned_nodes_ = net_.size();

  const int b = planner_->choose();
  if (b == 0) {
    const int asked = planner_->asked_micro_batch();
    const MemoryBreakdown smallest = breakdown(asked > 0 ? asked : planner_->smallest_micro_batch());
    memory::OutOfMemoryDetails details;
    details.requested = smallest.total();
    details.limit = options_.memory.budget;
    details.resource = "budget";
    throw BudgetTooSmall("the memory budget of " + memory::format_bytes(options_.memory.budget) +
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
      stack_->build_step_buffers(full.persistent.total() + full.input_staging, full.arena_bytes);
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
  recovery_ = std::make_unique<Recovery>(b, planner_->smallest_micro_batch(), options_.regrow_after_steps);
  // The plan fits the budget, but the device may hold less than it (another process): halve
  // as a step would.
  micro_batch_ = step_->build_fitting(b, recovery_->smallest());
  if (synchronised_batchnorm()) {
    agree_micro_batch();
    // No growing back: a rank alone cannot, and the others would follow it down each step. The
    // target stays the plan's, so that a restored state may ask for it (the ranks then agree).
    recovery_ = std::make_unique<Recovery>(b, planner_->smallest_micro_batch(), 0);
  }
}

bool Trainer::synchronised_batchnorm() const { return replicas_ && replicas_->synchronised_batchnorm(); }

// Note [Synchronised micro-batches] (replicas.cpp) says why and when.
void Trainer::agree_micro_batch() {
  micro_batch_ = replicas_->agree_micro_batch(
      micro_batch_, [this](int smallest) { return step_->build_fitting(smallest, recovery_->smallest()); });
}

int Trainer::rank() const { return replicas_ ? replicas_->rank() : 0; }
int Trainer::ranks() const { return replicas_ ? replicas_->ranks() : 1; }

void Trainer::synchronize_replicas() {
  if (replicas_) replicas_->synchronize();
}

MemoryBreakdown Trainer::breakdown(int micro_batch) const { return planner_->breakdown(micro_batch); }

const MemoryBreakdown& Trainer::memory() const { return step_->breakdown(); }

TrainerState Trainer::state() const {
  if (pending_)
    throw ConfigError("state: step " + std::to_string(pending_->report.step) + " is pending (its loss unread): drain() it first");
  TrainerState state{steps_, micro_batch_, recovery_->good_steps(), learning_rate_scale_};
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
  if (state.micro_batch != micro_batch_) micro_batch_ = step_->build_fitting(state.micro_batch, recovery_->smallest());
}

long Trainer::graph_replays() const { return step_ ? step_->graph_replays() : 0; }

Tensor Trainer::metric_sums() const { return Tensor{slots_->floats(), Shape{kLossSumFloats}}; }

void Trainer::check_capture() {
  if (!capture_) return;
  const std::string failure = step_->capture_failure();
  if (failure.empty()) return;
  capture_ = false;
  step_->stop_capturing();  // and the executors built from now on run eagerly
  if (on_recovery)
    on_recovery("step " + std::to_string(steps_ + 1) + ": recording the step as a graph failed (" + failure +
                "); running without graphs");
}

void Trainer::ensure_built(const char* call) {
  if (!params_) throw ConfigError(std::string(call) + ": this trainer has finished (finish() gave its memory back)");
  if (net_.size() != planned_nodes_)
    throw ConfigError(std::string(call) + ": the network has " + std::to_string(net_.size() - 1) + " layers, " +
                      std::to_string(planned_nodes_ - 1) + " when this trainer planned it: build a trainer for it");
  if (!step_->built()) micro_batch_ = step_->build_fitting(micro_batch_, recovery_->smallest());
}

ParameterStore& Trainer::parameters() {
  if (!params_) throw ConfigError("parameters: this trainer has finished (finish() gave its memory back)");
  return *params_;
}

void Trainer::check_inputs(const Batch& batch, const char* call) const {
  check_batch_inputs(batch, net_.input_shape(), call);
}

void Trainer::maybe_regrow() {
  const int b = micro_batch_;
  if (step_->recomputing_more()) {  // first back to the recomputation the budget alone asks for
    if (!recovery_->regrow_due()) return;
    micro_batch_ = step_->build_fitting(b, recovery_->smallest());
    if (!step_->recomputing_more() && on_recovery)
      on_recovery("step " + std::to_string(steps_ + 1) + ": micro-batch " + std::to_string(micro_batch_) +
                  " back to " + std::to_string(step_->breakdown().recomputed_layers) + " recomputed layers");
    return;
  }
  const int larger = recovery_->regrow(b);
  if (larger == 0) return;
  micro_batch_ = step_->build_fitting(larger, recovery_->smallest());
  if (micro_batch_ > b && on_recovery)
    on_recovery("step " + std::to_string(steps_ + 1) + ": micro-batch back up from " + std::to_string(b) + " to " +
                std::to_string(micro_batch_));
}

void Trainer::check_labels(const Batch& batch) const { check_batch_targets(batch, net_); }

int Trainer::run_micro_batches(const Batch& batch, bool training, float* logits,
                               const std::function<void(int first, int n)>& each) {
  if (batch.size == 0) return 0;  // a data-parallel rank's empty share
  const std::size_t sample = net_.input_shape().elements();
  StepExecutor& executor = step_->executor(training);
  // One seed for the whole optimizer step: with each micro-batch's offset in the batch, dropout
  // masks do not depend on the micro-batch size (nor on the rank a sample went to), so a replay
  // at a smaller one gives the same result.
  const std::uint64_t seed = splitmix64(options_.seed ^ splitmix64(static_cast<std::uint64_t>(steps_)));
  const int whole = batch.whole_size();
  // The loss's gradient per sample; in fp16 times the loss scale (unscale_gradients divides it out).
  const float grad_scale = training ? (scaler_ ? scaler_->scale() : 1.0f) / static_cast<float>(whole) : 0.f;
  GradientBuckets* buckets = training && replicas_ ? &replicas_->buckets() : nullptr;
  // Training micro-batches keep to the network's need (BatchNorm on one value per channel).
  const MicroBatchSplit split =
      split_into_micro_batches(batch.size, micro_batch_, training ? planner_->training_batch_need().samples : 1);
  const std::size_t outputs = net_.output_shape().elements();
  const std::size_t target_bytes = net_.target_bytes();
  for (int j = 0, first = 0; j < split.count; first += split.size(j), ++j) {
    Batch micro;
    micro.images = batch.images + static_cast<std::size_t>(first) * sample;
    if (batch.labels)
      micro.labels = batch.labels + first;
    else
      micro.targets = static_cast<const char*>(batch.targets) + static_cast<std::size_t>(first) * target_bytes;
    micro.size = split.size(j);
    micro.first = batch.first + first;  // its place in the whole batch, over every rank
    micro.global_size = whole;
    micro.on_device = batch.on_device;
    float* out = !logits ? nullptr : each ? logits : logits + static_cast<std::size_t>(first) * outputs;
    executor.run(micro, grad_scale, seed, out, j == split.count - 1 ? buckets : nullptr);
    if (each) each(first, micro.size);
  }
  check_capture();
  return split.count;
}

void Trainer::check_step_batch(const Batch& batch, const char* call) const {
  // Named only on a refusal: a step builds no string.
  auto refuse = [call](const std::string& why) { throw ConfigError(std::string(call) + ": " + why); };
  if (options_.communicator) {
    const RankShare mine = share_of_batch(std::max(batch.global_size, 0), rank(), ranks());
    if (batch.global_size <= 0 || batch.first != mine.first || batch.size != mine.size)
      refuse("samples " + std::to_string(batch.first) + " to " + std::to_string(batch.first + batch.size) +
             " are not a share of a batch of " + std::to_string(batch.global_size) + " for rank " +
             std::to_string(rank()) + " of " + std::to_string(ranks()) + " (its share: samples " +
             std::to_string(mine.first) + " to " + std::to_string(mine.first + mine.size) +
             "; a data-parallel rank gives Batch::first and global_size, as a loader with the communicator's "
             "rank and ranks does: LoaderOptions::rank, ranks)");
  } else if (batch.global_size != 0 && (batch.first != 0 || batch.global_size != batch.size)) {
    refuse("a share of a batch (Batch::first, global_size) without a communicator: a loader over several ranks "
           "(LoaderOptions::ranks) for a trainer of one (TrainerOptions::communicator)");
  } else if (batch.size <= 0) {
    refuse("empty batch");
  }
  // The whole batch's size, the same on every rank, so every rank refuses alike: none is left in a sum.
  const int whole = batch.whole_size();
  if (whole > options_.batch || (whole < options_.batch && !batch.last_of_epoch))
    refuse("a batch of " + std::to_string(whole) + " for a trainer planned for batches of " +
           std::to_string(options_.batch) + " (TrainerOptions::batch): " +
           (whole > options_.batch ? std::string("a step takes no more than the trainer's batch")
                                   : std::string("only an epoch's last batch (Batch::last_of_epoch) may be smaller")) +
           "; cut the loader's batches at the trainer's (LoaderOptions::batch = " + std::to_string(options_.batch) +
           ")");
  if (options_.communicator) {
    if (synchronised_batchnorm() && (batch.global_size % ranks() != 0 || batch.size != batch.global_size / ranks()))
      refuse("synchronised BatchNorm needs every batch shared evenly over the " +
             std::to_string(ranks()) + " ranks; this one holds " + std::to_string(batch.global_size) +
             " samples (leave out an uneven last batch: LoaderOptions::drop_last)");
    if (batch.size == 0) return;  // this rank sits the step out, but sums with the others
  }
  // A batch no larger than the trainer's always splits into micro-batches of the network's need
  // (the planner's smallest micro-batch is 2 x need - 1, or the batch itself), unless it is below
  // the need: an epoch's last batch of one sample under BatchNorm.
  const TrainingBatchNeed& need = planner_->training_batch_need();
  if (batch.size < need.samples)
    refuse("a batch of " + std::to_string(batch.size) + " cannot train this network: " + need.why);
}

StepReport Trainer::train_step(const Batch& batch) {
  if (pending_)
    throw ConfigError("train_step: step " + std::to_string(pending_->report.step) +
                      " was submitted and is pending: drain() it first");
  std::optional<StepReport> report = submit(batch, "train_step");
  return report ? *report : *drain();
}

std::optional<StepReport> Trainer::submit_step(const Batch& batch) { return submit(batch, "submit_step"); }

std::optional<StepReport> Trainer::submit(const Batch& batch, const char* call) {
  ensure_built(call);
  maybe_regrow();
  // Before the checks, which read the micro-batch: every rank then refuses a batch alike.
  if (synchronised_batchnorm()) agree_micro_batch();
  check_step_batch(batch, call);
  check_inputs(batch, call);
  check_labels(batch);
  const long staging_waits = input_->host_waits();
  // The state before this step goes to the copy the pending step's does not use.
  const int copy = overlapped_ ? static_cast<int>((steps_ + 1) % 2) : 0;
  params_->save_state(copy);
  std::array<double, 4> sums{};  // {ranks that failed, loss sum, correct, counted}
  double communication = 0;
  const int micro_batches = run_step_passes(batch, copy, !overlapped_, sums, communication);
  recovery_->step_succeeded();

  // The step before this one: its loss is read now, while this one's passes run, and before
  // its update is enqueued (settle() throws for a loss that is not finite).
  std::optional<StepReport> earlier;
  long waits = input_->host_waits() - staging_waits;
  if (pending_) {
    if (settle()) ++waits;
    earlier = pending_->report;
    pending_.reset();
  }
  const int whole = batch.whole_size();
  if (!overlapped_ && !std::isfinite(sums[1])) {
    // No optimizer step on a NaN or infinite loss: undo what the forward passes changed.
    params_->restore_state(copy);
    params_->zero_gradients();
    throw TrainingDiverged(steps_ + 1, sums[1], backend_.precision());
  }
  const float lr = learning_rate();
  const float scale = loss_scale();
  const bool applied = !scaler_ || unscale_gradients(copy, sums[1] / whole);
  // Enqueued before the loss is known: the update reads the loss sum and leaves everything as it
  // was when it is not finite.
  auto* slots = static_cast<TrainerSlots*>(slots_->data());
  if (applied)  // AdamW's count: the steps applied (TrainerState::skipped_steps)
    optimizer_->step(backend_, *params_, lr, steps_ + 1 - skipped_steps_, overlapped_ ? &slots->sums.loss : nullptr);
  ++steps_;
  StepReport report;
  report.loss_scale = scale;
  report.skipped = !applied;
  report.step = steps_;
  report.samples = whole;
  report.learning_rate = lr;
  report.micro_batch = micro_batch_;
  report.micro_batches = micro_batches;
  report.communication_seconds = communication;
  report.host_waits = waits;
  if (!overlapped_) {  // its loss is known: nothing is pending
    report.loss = sums[1] / whole;
    report.accuracy = accuracy_of(sums[2], sums[3], static_cast<std::size_t>(whole));
    return report;
  }
  const Fence sums_ready =
      backend_.copy_to_host_async(slots_->data(), input_->host_sums(), kLossSumFloats * sizeof(float));
  pending_ = PendingStep{report, copy, sums_ready, false};
  return earlier;
}

double Trainer::accuracy_of(double correct, double counted, std::size_t samples) const {
  if (net_.task() == Task::regress) return 0;
  const double over = counted_over(net_.task(), counted, samples);
  return over > 0 ? correct / over : 0;
}

int Trainer::run_step_passes(const Batch& batch, int state_copy, bool read_sums, std::array<double, 4>& sums,
                             double& communication) {
  for (;;) {
    params_->zero_gradients();
    backend_.fill(metric_sums(), 0.f);
    if (replicas_) replicas_->buckets().begin();
    std::optional<memory::OutOfMemory> failure;
    int micro_batches = 0;
    try {
      micro_batches = run_micro_batches(batch, true);
    } catch (const memory::OutOfMemory& error) {
      if (synchronised_batchnorm())  // the other ranks wait in a BatchNorm's sum
        throw Error("step " + std::to_string(steps_ + 1) + ": out of memory on rank " + std::to_string(rank()) +
                    " with synchronised BatchNorm, which cannot replay a step on one rank alone: " + error.what());
      failure = error;
    } catch (...) {
      // Any other failure: leave the parameters and state as they were before the step, and no
      // buffers held, then report it.
      params_->restore_state(state_copy);
      params_->zero_gradients();
      step_->release();
      throw;
    }
    sums[0] = failure ? 1 : 0;
    sums[1] = sums[2] = sums[3] = 0;
    if (!failure && read_sums) {
      float host[kLossSumFloats];
      backend_.copy_to_host(slots_->data(), host, sizeof host);
      sums[1] = host[0];
      sums[2] = host[1];
      sums[3] = host[2];
    }
    if (replicas_) communication += replicas_->finish_step(sums);
    if (sums[0] == 0) return micro_batches;
    // Some rank ran out of memory: every rank discards the partial gradients and state updates and
    // replays the same samples; the one that failed recomputes more or halves its micro-batch.
    params_->restore_state(state_copy);
    if (failure) shrink_after(*failure, "step " + std::to_string(steps_ + 1));
  }
}

bool Trainer::unscale_gradients(int state_copy, double loss) {
  auto* slots = static_cast<TrainerSlots*>(slots_->data());
  const Tensor found{&slots->gradients_not_finite, Shape{1}};
  backend_.fill(found, 0.f);
  backend_.unscale_gradients(params_->gradients(), 1.0f / scaler_->scale(), found);
  float not_finite = 0;
  backend_.copy_to_host(found.data, &not_finite, sizeof not_finite);
  if (not_finite == 0) {
    scaler_->step_applied();
    return true;
  }
  // Nothing of the step stays: BatchNorm's running statistics go back too (on every rank alike:
  // the gradients were summed over them).
  params_->restore_state(state_copy);
  params_->zero_gradients();
  if (!scaler_->step_overflowed()) throw LossScaleAtFloor(steps_ + 1, loss, scaler_->options().floor);
  ++skipped_steps_;
  return false;
}

bool Trainer::settle() {
  if (!pending_ || pending_->settled) return false;
  const bool waited = !backend_.reached(pending_->sums_ready);
  if (waited) backend_.wait(pending_->sums_ready);
  const float* host = input_->host_sums();
  StepReport& r = pending_->report;
  r.loss = static_cast<double>(host[0]) / r.samples;
  r.accuracy = accuracy_of(host[1], host[2], static_cast<std::size_t>(r.samples));
  if (!std::isfinite(host[0])) {
    // The device applied no update for it (the guard), nor for any step after it (none was
    // enqueued); the running statistics its forward passes moved come back from its copy.
    const long failed = r.step;
    const double loss = host[0];
    const int copy = pending_->state_copy;
    pending_.reset();
    params_->restore_state(copy);
    params_->zero_gradients();
    steps_ = failed - 1;
    throw TrainingDiverged(failed, loss, backend_.precision());
  }
  pending_->settled = true;
  return waited;
}

std::optional<StepReport> Trainer::drain() {
  if (!pending_) return std::nullopt;
  const bool waited = settle();
  StepReport report = pending_->report;
  if (waited) ++report.host_waits;
  pending_.reset();
  return report;
}

void Trainer::shrink_after(const memory::OutOfMemory& error, const std::string& where) {
  const int b = micro_batch_;
  if (step_->recompute_more()) {
    recovery_->failed_and_recomputed();
    if (on_recovery)
      on_recovery(where + ": out of memory at micro-batch " + std::to_string(b) + " (" + error.what() +
                  "); replaying it at micro-batch " + std::to_string(b) + " recomputing " +
                  std::to_string(step_->breakdown().recomputed_layers) + " layers");
    return;
  }
  const int smaller = recovery_->after_failure(b);
  if (smaller == 0) {  // nothing left to halve
    step_->release();
    throw memory::OutOfMemory(where + ": out of memory at micro-batch " + std::to_string(b) +
                                  ", the smallest planned for this network: " + error.what() + "\n" +
                                  format_memory_table(breakdown(b)),
                              error.details());
  }
  micro_batch_ = step_->build_fitting(smaller, recovery_->smallest());
  if (on_recovery)
    on_recovery(where + ": out of memory at micro-batch " + std::to_string(b) + " (" + error.what() +
                "); replaying it at micro-batch " + std::to_string(micro_batch_));
}

EvalResult Trainer::evaluate(const NextBatch& next) { return run_evaluation(next, nullptr); }

ClassEvaluation Trainer::evaluate_classes(const NextBatch& next) {
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

EvalResult Trainer::run_evaluation(const NextBatch& next, ClassEvaluation* classes) {
  if (!next) throw ConfigError("evaluate: no source of batches (an empty NextBatch)");
  ensure_built("evaluate");
  settle();  // a pending step's loss is checked before anything reads what it changed
  EvalResult result;
  const LossOptions& loss = net_.loss();
  const bool scored = loss.task != Task::classify;
  TaskMetrics metrics(loss.task, net_.num_classes(), loss.threshold);
  double loss_sum = 0, correct = 0, counted = 0;
  long batches = 0;
  std::vector<float> outputs;
  const Batch* current = nullptr;  // the batch being evaluated, for the scores' targets
  const std::size_t per_sample = net_.output_shape().elements();
  const std::size_t target_bytes = net_.target_bytes();
  const int height = loss.task == Task::segment ? net_.input_shape()[1] : 1;
  const int width = loss.task == Task::segment ? net_.input_shape()[2] : 1;
  // A task's scores are counted a micro-batch at a time: the host holds one micro-batch's
  // outputs (a segmentation's are a class score a pixel), not the batch's.
  std::function<void(int, int)> score;
  TaskMetrics batch_metrics = metrics;
  if (scored)
    score = [&](int first, int n) {
      for (int i = 0; i < n; ++i)
        batch_metrics.add(outputs.data() + static_cast<std::size_t>(i) * per_sample,
                          static_cast<const char*>(current->targets) + static_cast<std::size_t>(first + i) * target_bytes,
                          height, width);
    };
  while (auto batch = next()) {
    if (batch->size <= 0) continue;
    if (batch->on_device) throw ConfigError("evaluate: a batch in device memory (Batch::on_device) trains only");
    check_inputs(*batch, "evaluate");
    check_labels(*batch);
    ++batches;
    current = &*batch;
    if (classes) outputs.resize(static_cast<std::size_t>(batch->size) * per_sample);
    // Each batch's sums are read back on their own, so that a batch replayed after an
    // out-of-memory failure at a smaller micro-batch counts once; its scores likewise.
    for (;;) {
      backend_.fill(metric_sums(), 0.f);
      if (scored) {
        batch_metrics = TaskMetrics(loss.task, net_.num_classes(), loss.threshold);
        outputs.resize(static_cast<std::size_t>(micro_batch_) * per_sample);
      }
      try {
        run_micro_batches(*batch, false, classes || scored ? outputs.data() : nullptr, score);
        break;
      } catch (const memory::OutOfMemory& error) {
        shrink_after(error, "evaluation batch " + std::to_string(batches));
      } catch (...) {
        step_->release();  // a dynamic step memory may still hold buffers
        throw;
      }
    }
    float host[kLossSumFloats];
    backend_.copy_to_host(slots_->data(), host, sizeof host);
    loss_sum += host[0];
    correct += host[1];
    counted += host[2];
    result.samples += static_cast<std::size_t>(batch->size);
    if (classes) count_predictions(classes->confusion, outputs.data(), batch->labels, batch->size);
    if (scored) metrics.merge(batch_metrics);
  }
  if (replicas_) {
    // Each rank evaluated its share of the batches: the result is every rank's.
    std::vector<double> totals = {loss_sum, correct, counted, static_cast<double>(result.samples)};
    if (classes)
      for (const auto& row : classes->confusion) totals.insert(totals.end(), row.begin(), row.end());
    const std::vector<double> metric_sums = metrics.sums();
    totals.insert(totals.end(), metric_sums.begin(), metric_sums.end());
    replicas_->sum(totals);
    loss_sum = totals[0];
    correct = totals[1];
    counted = totals[2];
    result.samples = static_cast<std::size_t>(totals[3]);
    std::size_t k = 4;
    if (classes)
      for (auto& row : classes->confusion)
        for (std::size_t& n : row) n = static_cast<std::size_t>(totals[k++]);
    metrics.set_sums(std::vector<double>(totals.begin() + static_cast<std::ptrdiff_t>(k), totals.end()));
  }
  if (result.samples) {
    result.loss = loss_sum / static_cast<double>(result.samples);
    result.accuracy = accuracy_of(correct, counted, result.samples);
  }
  result.scores = metrics.scores();
  return result;
}

void Trainer::predict(const float* images, int count, float* logits) {
  if (count < 0) throw ConfigError("predict: " + std::to_string(count) + " images");
  if (count == 0) return;
  if (!logits) throw ConfigError("predict: nowhere to write the logits (null)");
  ensure_built("predict");
  settle();
  // The loss is run and ignored: targets of zeros (int32 for the alignment of a classification's).
  const std::size_t target_bytes = static_cast<std::size_t>(count) * net_.target_bytes();
  const std::vector<std::int32_t> labels((target_bytes + sizeof(std::int32_t) - 1) / sizeof(std::int32_t), 0);
  Batch batch{images, nullptr, count};
  if (net_.task() == Task::classify)
    batch.labels = labels.data();
  else
    batch.targets = labels.data();
  check_inputs(batch, "predict");
  for (;;) {
    try {
      run_micro_batches(batch, false, logits);
      return;
    } catch (const memory::OutOfMemory& error) {
      shrink_after(error, "prediction");
    } catch (...) {
      step_->release();
      throw;
    }
  }
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
