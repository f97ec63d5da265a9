#pragma once
// Inference on its own plan: a network's outputs and its evaluation, with no training memory.
// A Predictor plans forward only (with its own planner, in the tree), chooses the largest micro-batch that fits
// the budget (at most max_batch), and reserves the parameters (no gradients, no optimizer state)
// and one arena once; a call after that allocates nothing. BatchNorm runs on its running
// statistics, dropout is the identity.
#include <cstdint>
#include <memory>
#include <vector>

#include <cnnengine/base/batch.hpp>
#include <cnnengine/engine/core/network.hpp>
#include <cnnengine/engine/core/parameter_store.hpp>
#include <cnnengine/engine/plan/memory_report.hpp>
#include <cnnengine/memory/memory_stack.hpp>
#include <cnnengine/memory/out_of_memory.hpp>

namespace cnn {

namespace memory {
class Buffer;
}  // namespace memory

class InferencePlanner;
class InputStager;
class ForwardPass;
struct InferencePlan;

struct InferenceOptions {
  int max_batch = 256;             // images one forward pass takes at most (the largest micro-batch)
  // The budget (0: none), what is set aside in it for the libraries' workspaces, and the loaders'
  // staging under it (memory/memory_stack.hpp); a Predictor settles it with its memory stack.
  memory::BudgetAccount account;
  std::size_t workspace_limit = std::size_t{256} << 20;  // per layer
  // As TrainerOptions::rewrite_graph: the rewrites that give provably the same outputs.
  bool rewrite_graph = true;
};

class Predictor {
 public:
  // Memory from the backend's device through a memory stack of its own, over the budget of
  // options.account: the budget caps the parameters, the arena, the libraries' workspaces and the
  // loaders' staging together. Throws BudgetTooSmall, with the byte table, where not even one
  // image fits. The parameters start as a trainer's would from seed 1: load them
  // (load_parameters) before use.
  Predictor(Network& network, Backend& backend, InferenceOptions options = {});
  // The same stack over `upstream` instead (to count or fail its calls).
  Predictor(Network& network, Backend& backend, memory::MemoryResource& upstream, InferenceOptions options = {});
  // A stack the caller built, with its loaders' staging staged or booked (Loader::book,
  // MemoryStack::book_staging) before: the plan leaves them room. Its budget replaces the
  // account's.
  Predictor(Network& network, Backend& backend, memory::MemoryStack& stack, InferenceOptions options = {});
  ~Predictor();
  Predictor(const Predictor&) = delete;
  Predictor& operator=(const Predictor&) = delete;

  // For `count` images (host floats, NCHW of the input shape): count x the output's elements
  // floats (a class score or a value each; a segmentation's a class score a pixel) into `logits`,
  // in micro-batches of at most micro_batch().
  void logits(const float* images, int count, float* logits);
  // Over every batch `next` gives: the mean loss and accuracy, the task's scores (EvalResult),
  // and with evaluate_classes a classification's confusion matrix (empty for the other tasks).
  EvalResult evaluate(const NextBatch& next);
  ClassEvaluation evaluate_classes(const NextBatch& next);

  ParameterStore& parameters() { return *params_; }
  const ParameterStore& parameters() const { return *params_; }
  // The plan reserved: bytes by category at micro_batch().
  const MemoryBreakdown& memory() const { return breakdown_; }
  int micro_batch() const { return breakdown_.micro_batch; }
  memory::MemoryStack& memory_stack() { return *stack_; }

 private:
  // The plan and arena of one micro-batch size, reserved by the recovery policy
  // (MicroBatchRecovery): at the largest that fits, or the next smaller one where the device holds
  // less than the plan (another process).
  class ReservedMemory;
  void start();
  ClassEvaluation run_evaluation(const NextBatch& next, bool confusion);

  Network& net_;
  Backend& backend_;
  InferenceOptions options_;
  std::unique_ptr<memory::MemoryStack> own_stack_;
  memory::MemoryStack* stack_ = nullptr;
  std::unique_ptr<InferencePlanner> planner_;
  std::unique_ptr<ParameterStore> params_;
  std::unique_ptr<memory::Buffer> slots_;  // ForwardSlots
  std::unique_ptr<InputStager> input_;
  std::unique_ptr<InferencePlan> plan_;
  MemoryBreakdown breakdown_;
  std::unique_ptr<memory::Buffer> arena_;
  std::unique_ptr<ForwardPass> pass_;
  std::unique_ptr<ReservedMemory> reserved_;
  // A micro-batch's targets: logits() runs no loss, yet stages them (int32 for the alignment of
  // a classification's labels).
  std::vector<std::int32_t> zero_targets_;
  std::vector<float> batch_logits_;  // a micro-batch's, for the confusion matrix; a sample's for the other tasks' scores
};

}  // namespace cnn
