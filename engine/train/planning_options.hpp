#pragma once
// What a trainer plans with, for those that plan as it would without building one:
// `train_images --plan`, the benchmarks, the tests of the planner.
#include <cstddef>

#include "engine/plan/batch_planner.hpp"
#include <cnnengine/engine/train/trainer.hpp>

namespace cnn {

// What the budget sets aside for a trainer beside its own memory: the backend's libraries'
// workspaces and, in a data-parallel run, the communicator's buffers.
struct AccountSetAside {
  std::size_t libraries = 0, communication = 0;
};
AccountSetAside trainer_set_aside(const TrainerOptions& options, const Network& network, const Backend& backend);

// The options the trainer plans with under `account` (the trainer's: its memory stack's, settled
// with trainer_set_aside): `options` plus its optimizer's state slots, its own persistent bytes
// and, in a data-parallel run, a rank's share of the batch.
BatchPlanOptions planning_options(const TrainerOptions& options, const Network& network, const Backend& backend,
                                  const memory::BudgetAccount& account);
// The same under options.memory_budget, with trainer_set_aside set aside. `train_images --plan`
// and the benchmarks plan with these, so that their answers are the trainer's: with `stack`,
// those of a trainer built on it now (its options, the loaders' staging it counts).
BatchPlanOptions planning_options(const TrainerOptions& options, const Network& network, const Backend& backend);
BatchPlanOptions planning_options(const TrainerOptions& options, const Network& network, const Backend& backend,
                                  const memory::MemoryStack& stack);

}  // namespace cnn
