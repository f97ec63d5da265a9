#pragma once
// The training loop's engine side: builds the memory stack from the options (so a budget is
// enforced with no more code), chooses the micro-batch that fits it, reserves the persistent
// blocks and the step memory once, and runs optimizer steps of the requested batch as k
// micro-batches whose gradients add up to the full-batch gradient.
#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <cnnengine/base/batch.hpp>
#include <cnnengine/base/error.hpp>
#include <cnnengine/engine/core/layer.hpp>
#include <cnnengine/engine/core/network.hpp>
#include <cnnengine/engine/core/parameter_store.hpp>
#include <cnnengine/engine/plan/memory_report.hpp>
#include <cnnengine/engine/train/loss_scale.hpp>
#include <cnnengine/engine/train/optimizer.hpp>
#include <cnnengine/engine/train/training_diverged.hpp>
#include <cnnengine/memory/memory_stack.hpp>
#include <cnnengine/memory/out_of_memory.hpp>

namespace cnn {

namespace memory {
class Buffer;
}  // namespace memory

class BatchPlanner;
class StepResources;
class MicroBatchRecovery;
class LossScaler;
class Replicas;
class InputStager;

// Whether a trainer records its micro-batches as graphs (TrainerOptions::capture_graphs).
enum class GraphCapture {
  automatic,  // wherever graph_capture_blocked finds nothing against it
  always,     // a ConfigError naming what is against it
  never,
};

struct TrainerOptions {
  int batch = 64;        // samples per optimizer step, whatever the budget
  int micro_batch = 0;   // 0: the largest that fits the budget, at most the batch
  int accumulate = 0;    // > 0: micro-batch ceil(batch / this), so at most this many per step
  // The budget in bytes (0: none) over the trainer's memory, the libraries' workspaces and the
  // loaders' staging together (memory::parse_bytes("2GiB")). A trainer on a caller's memory stack
  // takes the stack's budget, strategy, trace and arena factor instead of these four.
  std::size_t memory_budget = 0;
  // Where step buffers come from: the plan's arena, or a strategy to compare it with.
  memory::Strategy memory_strategy = memory::Strategy::planned;
  // Every allocation and release recorded here (memory::replay runs it again); empty: none.
  std::filesystem::path memory_trace;
  // The arena strategy without a budget: this x the planned arena.
  double arena_factor = 2.0;
  std::size_t workspace_limit = std::size_t{256} << 20;  // per layer
  // Let the engine rewrite the network where the result is provably the same (today: ReLU then
  // max pooling becomes max pooling then ReLU; see Network::commute_relu_and_max_pool).
  bool rewrite_graph = true;
  // What a step may recompute during backward instead of keeping (docs/design.md,
  // "Recomputation"). Under `automatic` with no micro-batch or count given, the planner weighs
  // micro-batch and recomputation together for the highest expected throughput.
  RecomputePolicy recompute = RecomputePolicy::none;
  // In bf16 and fp16: store the values between layers in 16 bits where the plan comes out smaller,
  // or always (engine/plan/detail/step_plan.hpp).
  NarrowValues narrow_values = NarrowValues::where_smaller;
  std::uint64_t seed = 1;
  // After an out-of-memory recovery, try the next larger micro-batch (up to the chosen one)
  // after this many good steps: the pressure may have been transient. 0: never.
  int regrow_after_steps = 200;

  // Record each micro-batch size's forward and backward once and replay the recording (CUDA
  // graphs): one launch instead of one per kernel. By default wherever it can run
  // (graph_capture_blocked); a capture that fails is logged and the run goes on without.
  GraphCapture capture_graphs = GraphCapture::automatic;

  long total_steps = 0;             // the run's length, for the cosine schedule (0: unknown, no decay)
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  // On a backend in fp16 (Backend::precision): dynamic loss scaling. Its steps are not
  // overlapped (submit_step): each step's gradients are checked before its update.
  LossScaleOptions loss_scale;

  // Data-parallel training (docs/design.md, "Data-parallel training"): this trainer is one of
  // communicator->ranks() replicas that train one model, each on its share of every batch
  // (Batch::first and global_size, share_of_batch); `batch` stays the whole batch. Gradients
  // are summed over the ranks in buckets of gradient_bucket_bytes as backward produces them;
  // BatchNorm's running statistics are rank 0's (DDP's choice), or with sync_batchnorm its batch
  // statistics are over every rank's micro-batch. Not owned: it must outlive the trainer.
  Communicator* communicator = nullptr;
  bool sync_batchnorm = false;
  std::size_t gradient_bucket_bytes = std::size_t{1} << 20;
};

// What keeps a trainer with these options on this backend from recording its steps as graphs:
// a backend that cannot capture, a strategy other than the planned one, synchronised BatchNorm
// (it sums over the ranks inside forward and backward). Empty where nothing does.
std::string graph_capture_blocked(const TrainerOptions& options, const Backend& backend);
// What in the options alone keeps it (the strategy, synchronised BatchNorm), on any backend. The
// reasons quote the fields that cause them (`sync_batchnorm`), as an OptionError's message does.
std::string graph_capture_blocked(const TrainerOptions& options);

// The memory stack's options that `options` ask for (memory_budget, memory_strategy, memory_trace,
// arena_factor), and the reverse: `options` with a stack's.
memory::MemoryOptions memory_options(const TrainerOptions& options);
TrainerOptions with_memory_options(TrainerOptions options, const memory::MemoryOptions& memory);

// The memory stack a trainer on `backend` with `options` builds for itself: the backend's device
// memory, its staging memory for the loaders, one budget over both. Build it first to put a
// loader under the same budget (data::Loader(data, options, stack)), then the trainer on it.
memory::MemoryStack memory_stack_for(Backend& backend, const TrainerOptions& options);
// The same from memory options alone (a Model's or a Predictor's stack, under a budget).
memory::MemoryStack memory_stack_for(Backend& backend, const memory::MemoryOptions& options);

struct StepReport {
  long step = 0;        // this step's number: optimizer steps up to it
  int samples = 0;      // the whole batch's, over every rank
  double loss = 0;      // mean over the step's samples (every rank's)
  double accuracy = 0;
  float learning_rate = 0;
  int micro_batch = 0;
  int micro_batches = 0;
  // Data-parallel: seconds this rank waited, after its last backward, for the gradient sums and
  // the step's status (the communication that computation did not hide).
  double communication_seconds = 0;
  // fp16's loss scaling: the scale this step ran at (0: none), and whether its gradients
  // overflowed, so that it applied nothing (the scale then backed off).
  float loss_scale = 0;
  bool skipped = false;
  // Times the host waited for the device while this step was submitted: for a micro-batch's
  // staging buffer (the host two micro-batches ahead) or for a loss it needed. 0 where the
  // device keeps up; never a wait for the whole device on the normal path (submit_step).
  long host_waits = 0;
};

// Where a trainer is: what a checkpoint keeps of it, so that a run resumed from the checkpoint
// continues exactly as if it had not stopped.
struct TrainerState {
  long steps = 0;        // optimizer steps taken (skipped ones too): the schedule's position, dropout's seed
  int micro_batch = 0;   // in use now (below the planned one for a while after a recovery)
  long good_steps = 0;   // steps since the last recovery (the micro-batch grows back after enough)
  float learning_rate_scale = 1;  // set_learning_rate_scale's
  // fp16's loss scaling: the scale (0: none kept, a run that scales starts at its initial one),
  // the applied steps in a row at it, and the steps skipped (whose gradients overflowed) so far:
  // AdamW counts the steps applied, steps - skipped_steps (as PyTorch's Adam, whose step() a
  // skipped step never calls).
  float loss_scale = 0;
  long loss_scale_steps = 0;
  long skipped_steps = 0;
};

class Trainer {
 public:
  // Memory from the backend's device, through a memory stack built from the options: the
  // budget is a hard cap on the trainer's memory, the libraries' workspaces and the loaders'
  // staging together, and going over it is a memory::OutOfMemory. The plan leaves room for the
  // loaders the stack's account counts when the trainer is built: those built on it
  // (data::Loader(data, options, stack)) and those booked for later (data::Loader::book). A
  // loader with no room is refused. So to feed this trainer from a loader under a budget, build
  // the stack first (memory_stack_for), the loader on it, then the trainer on the stack.
  Trainer(Network& network, Backend& backend, TrainerOptions options);
  // The same stack over `upstream` instead (to count or fail its calls).
  Trainer(Network& network, Backend& backend, memory::MemoryResource& upstream, TrainerOptions options);
  // A stack the caller built (and may have wrapped, and staged or booked its loaders on): its
  // options replace the trainer's memory options (with_memory_options). Its step buffers are
  // built here from this trainer's plan, unless the caller built them. It must outlive the trainer.
  Trainer(Network& network, Backend& backend, memory::MemoryStack& stack, TrainerOptions options);
  ~Trainer();

  // Bytes by category for micro-batch b, computed from the plan without allocating.
  MemoryBreakdown breakdown(int micro_batch) const;
  const MemoryBreakdown& memory() const;
  int micro_batch() const;
  // The samples of an optimizer step (TrainerOptions::batch; over every rank in a data-parallel
  // run): the batch its loader must cut (LoaderOptions::batch).
  int batch() const { return options_.batch; }
  // Throws ConfigError after finish().
  ParameterStore& parameters();
  const Optimizer& optimizer() const { return *optimizer_; }
  long steps() const { return steps_; }
  // fp16's loss scaling: the scale the next step runs at (0: this trainer does not scale), and
  // the steps skipped so far because their gradients overflowed (counted in steps()).
  float loss_scale() const;
  long skipped_steps() const { return skipped_steps_; }
  // The rate the next optimizer step takes: the schedule's at that step times the scale.
  float learning_rate() const;
  // Multiplies the schedule's rates from the next step on (a callback's change, a reduction on a
  // plateau); kept in state(), so that a resumed run goes on at the same rates. Finite and
  // positive, or a ConfigError.
  void set_learning_rate_scale(float scale);
  float learning_rate_scale() const { return learning_rate_scale_; }
  // Throws ConfigError while a submitted step is pending (its loss unread: drain() first).
  TrainerState state() const;
  // Continues from `state` (the parameters and optimizer state are restored apart, into
  // parameters()). A micro-batch this trainer may not use, or a pending step, is a ConfigError.
  void restore(const TrainerState& state);
  // Data-parallel: rank 0's parameters, running statistics and optimizer state over every
  // rank's (after loading or restoring them, so that the replicas start alike). Nothing alone.
  void synchronize_replicas();
  int rank() const;
  int ranks() const;
  memory::MemoryStack& memory_stack() { return *stack_; }
  // Micro-batches run by replaying a recording (capture_graphs), whether recording is on, and
  // why not where it is off (empty where it is on).
  long graph_replays() const;
  bool capturing_graphs() const { return capture_; }
  const std::string& graphs_off_because() const { return graphs_off_because_; }

  // One optimizer step over `batch` (split into micro-batches), waiting for its loss. The batch
  // is the trainer's (TrainerOptions::batch): a batch of another size is a ConfigError naming
  // both, but for an epoch's last (Batch::last_of_epoch, which the loader sets), which may be
  // smaller. In a data-parallel run it is this rank's share (share_of_batch), its global_size
  // the whole batch's. Throws TrainingDiverged, changing nothing, when the loss is not finite. In
  // fp16 a step whose gradients overflow applies nothing and is reported skipped
  // (StepReport::skipped), or, at the loss scale's floor, throws LossScaleAtFloor. A step
  // submitted with submit_step must be drained first (ConfigError).
  StepReport train_step(const Batch& batch);
  // The same step without waiting for the device. Every step's report comes back once, in
  // order, from submit_step or drain(); at most one step is pending.
  // - Where the backend runs copies beside compute (CUDA): the step's input is copied and its
  //   work enqueued (the optimizer update included), and the call returns the report of the step
  //   submitted before it, whose loss is read now, one step late (empty for the first). The host
  //   thus prepares the next batch while this one computes. A NaN or infinite loss still stops
  //   the run before another step is applied: each update is enqueued with its step's loss sum
  //   as a guard (Backend::sgd_update), so the device applies none for a step whose loss is not
  //   finite; the host reads that loss in the next submit_step, before enqueueing that step's
  //   update, restores the running statistics saved before the failed step (a second copy:
  //   ParameterStore::save_state), and throws TrainingDiverged naming it.
  // - Elsewhere (the CPU, data-parallel ranks, which sum the step's status first, fp16 with loss
  //   scaling, which checks the step's gradients first): the step has run when the call returns,
  //   and so comes its report.
  std::optional<StepReport> submit_step(const Batch& batch);
  // The pending step's report, waiting for its loss (TrainingDiverged as above); empty when
  // none is pending. drain() before saving the trainer's state (state() refuses otherwise).
  std::optional<StepReport> drain();
  bool step_pending() const { return pending_.has_value(); }
  // Batches of any size (evaluation has no optimizer step's batch). In a data-parallel run each
  // rank gives its share of the batches, and the result is every rank's.
  // A pending step's loss is read first (TrainingDiverged where it is not finite); its report
  // still comes from drain(). The result holds the task's scores (EvalResult::scores);
  // evaluate_classes adds a classification's confusion matrix (empty for the other tasks).
  EvalResult evaluate(const NextBatch& next);
  ClassEvaluation evaluate_classes(const NextBatch& next);
  // Gives back every byte (the trainer cannot train after this) and checks that the memory
  // trace, if one was asked for, was written whole (MemoryStack::finish_trace).
  void finish();
  // Logged when a step ran out of memory and was replayed at a smaller micro-batch, when the
  // micro-batch grows back, and when a capture fails and the run goes on without graphs.
  std::function<void(const std::string&)> on_recovery;

 private:
  void start();
  // Before a call that runs the network: refuses a finished trainer or a network changed since
  // the plan, then builds the step memory if a failure released it.
  void ensure_built(const char* call);
  // The step pipeline (step_pipeline.cpp): a step submitted, its passes replayed after an
  // out-of-memory failure until they fit, its sums settled one step late where steps overlap.
  std::optional<StepReport> submit(const Batch& batch, const char* call);
  // Runs the batch's micro-batches, their logits to `logits` when it is not null, the last one's
  // gradients to the buckets in a data-parallel step; returns how many. With `each`, `logits`
  // holds one micro-batch's outputs, and each(first, n) is called after the micro-batch of the
  // batch's samples first .. first + n - 1 has run.
  int run_micro_batches(const Batch& batch, bool training, float* logits = nullptr,
                        const std::function<void(int first, int n)>& each = {});
  // A step's forward and backward passes, replayed after an out-of-memory failure until they
  // fit. With `read_sums`, the loss and accuracy sums are read back into `sums` ({ranks that
  // failed, loss, correct}, every rank's in a data-parallel run). Returns the micro-batches.
  int run_step_passes(const Batch& batch, int state_copy, bool read_sums, std::array<double, 4>& sums,
                      double& communication);
  // fp16: divides the step's gradients by the loss scale and returns true; or, where one of them
  // is not finite, restores the state before the step (state_copy), backs the scale off and
  // returns false (LossScaleAtFloor at the floor). `loss`: the step's, for the error.
  bool unscale_gradients(int state_copy, double loss);
  // Reads the pending step's sums back (waiting if they have not come: returns whether it
  // waited), and throws TrainingDiverged, the state before it restored, if its loss is not
  // finite; else it is settled.
  bool settle();
  // The task's accuracy: `correct` of `counted` (a classification's: of `samples`); 0 for a regression.
  double accuracy_of(double correct, double counted, std::size_t samples) const;
  // Synchronised BatchNorm over several ranks: the ranks agree on one micro-batch size (Note
  // [Synchronised micro-batches], with the replicas).
  bool synchronised_batchnorm() const;
  void agree_micro_batch();
  // evaluate(), with a classification's confusion matrix where `confusion`.
  ClassEvaluation run_evaluation(const NextBatch& next, bool confusion);
  // After a capture failed: log it once and record no more.
  void check_capture();
  Tensor metric_sums() const;

  Network& net_;
  Backend& backend_;
  TrainerOptions options_;
  std::unique_ptr<memory::MemoryStack> own_stack_;
  memory::MemoryStack* stack_ = nullptr;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<BatchPlanner> planner_;
  std::unique_ptr<ParameterStore> params_;
  std::unique_ptr<memory::Buffer> slots_;  // TrainerSlots (trainer.cpp): the metric sums and the micro-batch's scalars
  std::unique_ptr<InputStager> input_;
  std::unique_ptr<StepResources> step_;
  std::unique_ptr<MicroBatchRecovery> recovery_;  // the micro-batch held, shrunk and grown back
  std::unique_ptr<Replicas> replicas_;  // data-parallel runs only
  std::unique_ptr<LossScaler> scaler_;  // fp16 runs only
  long steps_ = 0;
  long skipped_steps_ = 0;
  float learning_rate_scale_ = 1;
  int planned_nodes_ = 0;  // the network's size when planned
  bool capture_ = false;
  std::string graphs_off_because_;
  // Steps are submitted without waiting for their loss: the backend overlaps copies and compute,
  // and no other rank needs the step's status first.
  bool overlapped_ = false;
  // The step submitted last until its report is taken: its sums on their way back (`sums_ready`)
  // or read (`settled`).
  struct PendingStep {
    StepReport report;
    int state_copy = 0;  // where the state before it is saved
    Fence sums_ready;
    bool settled = false;
  };
  std::optional<PendingStep> pending_;
};

}  // namespace cnn
