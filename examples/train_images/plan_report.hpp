#pragma once
// train_images --plan: bytes for a range of micro-batches, the largest that fits the budget, and
// the chosen micro-batch and count. It plans only: nothing is allocated, whatever the device.
#include "engine/train/trainer.hpp"

namespace cnn::app {

// As a trainer with `options` on `stack` would plan (the loaders its account counts included).
// Returns the process exit code: 0, or 3 when nothing fits the budget.
int print_plan(Network& network, Backend& backend, const TrainerOptions& options, const memory::MemoryStack& stack);

}  // namespace cnn::app
