// The trainer's step pipeline: a batch checked once, split into micro-batches, its passes
// replayed after an out-of-memory failure until they fit (MicroBatchRecovery), the optimizer
// step applied, and, where the backend overlaps copies and compute, the step's loss read one
// step late (Trainer::submit_step).
#include <array>
#include <cmath>
#include <cstdint>
#include <optional>

#include <cnnengine/engine/core/backend.hpp>
#include "engine/core/detail/batch_checks.hpp"
#include "engine/core/detail/input_stager.hpp"
#include "engine/plan/micro_batch_recovery.hpp"
#include "engine/train/detail/gradient_buckets.hpp"
#include "engine/train/detail/loss_scaler.hpp"
#include "engine/train/detail/replicas.hpp"
#include "engine/train/detail/step_resources.hpp"
#include "engine/train/detail/trainer_slots.hpp"
#include <cnnengine/engine/train/trainer.hpp>
#include "memory/buffer.hpp"

namespace cnn {

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
  recovery_->maybe_regrow(steps_ + 1);
  // Before the checks, which read the micro-batch: every rank then refuses a batch alike.
  if (synchronised_batchnorm()) agree_micro_batch();
  const TrainingBatchNeed& need = planner_->training_batch_need();
  check_step_batch(batch,
                   {options_.batch, options_.communicator != nullptr, rank(), ranks(), synchronised_batchnorm(),
                    need.samples, need.why},
                   net_, call);
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
  report.micro_batch = micro_batch();
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
    if (failure) recovery_->shrink_after(*failure, "step " + std::to_string(steps_ + 1));
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
      split_into_micro_batches(batch.size, micro_batch(), training ? planner_->training_batch_need().samples : 1);
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

}  // namespace cnn
