#pragma once
// The training loop's engine side: chooses the micro-batch that fits the budget, reserves the
// persistent block and the step arena once, and runs optimizer steps of the requested batch as
// k micro-batches whose gradients add up to the full-batch gradient.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "cnnengine/engine/batch_planner.hpp"
#include "cnnengine/engine/memory_report.hpp"
#include "cnnengine/engine/optimizer.hpp"
#include "cnnengine/engine/detail/step_executor.hpp"
#include "cnnengine/memory/buffer.hpp"
#include "cnnengine/memory/out_of_memory.hpp"

namespace cnn {

struct TrainerOptions : BatchPlanOptions {
  std::uint64_t seed = 1;
  // Null: the planned strategy (one arena, fixed offsets). Otherwise step buffers are allocated
  // from this resource when they are produced and freed after their last use, as a framework
  // would (direct, pool and arena strategies), for comparison.
  memory::MemoryResource* step_allocator = nullptr;
  // After an out-of-memory recovery, try the next larger micro-batch (up to the chosen one)
  // after this many good steps: the pressure may have been transient. 0: never.
  int regrow_after_steps = 200;

  // Record each micro-batch size's forward and backward once and replay the recording (CUDA
  // graphs): one launch instead of one per kernel. Needs the planned strategy and a backend
  // that can capture (Backend::capture_support); a capture that fails is logged and the run
  // goes on without.
  bool capture_graphs = false;

  long total_steps = 0;             // for the schedule
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
};

// What the trainer itself keeps on the device beside the parameter store: the loss and accuracy
// sums and the micro-batch's scalars, at fixed addresses (a recorded step reads them there).
struct TrainerSlots {
  float loss_sum = 0.0f;
  float correct = 0.0f;
  StepScalars scalars;
};
inline constexpr std::size_t kTrainerMetricsBytes = sizeof(TrainerSlots);

// The options the trainer plans with: `options` plus its optimizer's state slots and its own
// persistent bytes. `train_images --plan` and the benchmarks plan with these too, so that their
// answers are the trainer's.
BatchPlanOptions planning_options(const TrainerOptions& options);

// Refusal before step 1: the plan cannot fit the budget even at the smallest micro-batch.
class BudgetTooSmall : public memory::OutOfMemory {
 public:
  BudgetTooSmall(std::string message, memory::OutOfMemoryDetails details)
      : OutOfMemory(std::move(message), std::move(details)) {}
};

// A step whose loss is NaN or infinite. Thrown before the optimizer step: the parameters and
// the optimizer state are as they were before the step.
class TrainingDiverged : public Error {
 public:
  TrainingDiverged(long step, double loss);
  long step() const { return step_; }
  double loss() const { return loss_; }

 private:
  long step_;
  double loss_;
};

struct HostBatch {
  const float* images = nullptr;  // size samples, NCHW
  const std::int32_t* labels = nullptr;
  int size = 0;
};
using NextBatch = std::function<std::optional<HostBatch>()>;

struct StepReport {
  long step = 0;        // optimizer steps so far
  int samples = 0;
  double loss = 0;      // mean over the step's samples
  double accuracy = 0;
  float learning_rate = 0;
  int micro_batch = 0;
  int micro_batches = 0;
};

struct EvalResult {
  double loss = 0, accuracy = 0;
  std::size_t samples = 0;
};

class Trainer {
 public:
  // `resource` gives the persistent block and the arena (wrap it in adaptors to count or cap).
  Trainer(Network& network, Backend& backend, memory::MemoryResource& resource, TrainerOptions options);
  ~Trainer();

  // Bytes by category for micro-batch b, computed from the plan without allocating.
  MemoryBreakdown breakdown(int micro_batch) const { return planner_->breakdown(micro_batch); }
  const MemoryBreakdown& memory() const { return breakdown_; }
  int micro_batch() const { return micro_batch_; }
  const StepPlan& plan() const { return *plan_; }  // the last plan made
  ParameterStore& parameters() { return *params_; }
  const Optimizer& optimizer() const { return *optimizer_; }
  long steps() const { return steps_; }
  // Micro-batches run by replaying a recording (capture_graphs), and whether recording is on.
  long graph_replays() const;
  bool capturing_graphs() const { return capture_; }

  // One optimizer step over a host batch of any size (split into micro-batches). Throws
  // TrainingDiverged, changing nothing, when the loss is not finite.
  StepReport train_step(const HostBatch& batch);
  EvalResult evaluate(const NextBatch& next);
  // Logged when a step ran out of memory and was replayed at a smaller micro-batch, when the
  // micro-batch grows back, and when a capture fails and the run goes on without graphs.
  std::function<void(const std::string&)> on_recovery;

 private:
  // Plans and reserves the step memory for micro-batch b; on failure holds none and rethrows.
  void build(int micro_batch);
  // build(), halving b while the step memory cannot be had. Returns the b built.
  int build_fitting(int micro_batch);
  void ensure_built();
  void maybe_regrow();
  void check_labels(const HostBatch& batch) const;
  void release_step_memory();
  // After an out-of-memory failure in `where` (for the log): the step memory rebuilt at half
  // the micro-batch or less, or, at the smallest micro-batch, an OutOfMemory with the byte table.
  void shrink_after(const memory::OutOfMemory& error, const std::string& where);
  // Runs the batch's micro-batches; returns how many.
  int run_micro_batches(const HostBatch& batch, bool training);
  StepSlots slots() const;
  // After a capture failed in an executor: log it once and record no more.
  void check_capture();

  Network& net_;
  Backend& backend_;
  memory::MemoryResource& resource_;
  TrainerOptions options_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<BatchPlanner> planner_;
  std::unique_ptr<ParameterStore> params_;
  std::unique_ptr<StepPlan> plan_, eval_plan_;
  memory::Buffer metrics_;  // device: loss sum, correct count
  memory::Buffer arena_;    // the planned strategy's step arena
  std::unique_ptr<StepMemory> memory_, eval_memory_;
  std::unique_ptr<StepExecutor> executor_, eval_executor_;
  MemoryBreakdown breakdown_;
  long steps_ = 0;
  int micro_batch_ = 0;
  int target_micro_batch_ = 0;  // what the budget allows; recoveries go below it for a while
  long good_steps_since_recovery_ = 0;
  bool capture_ = false;
  long replays_before_rebuild_ = 0;  // by executors since released
};

}  // namespace cnn
