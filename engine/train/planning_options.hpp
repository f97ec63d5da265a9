#pragma once
// What a trainer plans with, for those that plan as it would without building one:
// `train_images --plan`, the benchmarks, the tests of the planner.
#include "engine/plan/batch_planner.hpp"
#include "engine/train/trainer.hpp"

namespace cnn {

// The options the trainer plans with: `options` plus its optimizer's state slots, its own
// persistent bytes, the budget's account (the backend's libraries' workspaces set aside) and, in
// a data-parallel run, the communicator's buffers and a rank's share of the batch.
// `train_images --plan` and the benchmarks plan with these too, so that their answers are the
// trainer's: with `stack`, those of a trainer on it (its options, the loaders' staging it counts).
BatchPlanOptions planning_options(const TrainerOptions& options, const Network& network, const Backend& backend);
BatchPlanOptions planning_options(const TrainerOptions& options, const Network& network, const Backend& backend,
                                  const memory::MemoryStack& stack);

}  // namespace cnn
