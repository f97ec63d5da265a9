#pragma once
// train_images --plan: bytes for a range of micro-batches, the largest that fits the budget, and
// the chosen micro-batch and count; for --evaluate and --predict, the inference plan (forward
// only) instead. It plans only: nothing is allocated, whatever the device.
#include "engine/infer/inference_planner.hpp"
#include <cnnengine/engine/train/trainer.hpp>

namespace cnn::app {

// As a trainer with `options` on `stack` would plan (the loaders its account counts included).
// Returns the process exit code: 0, or 3 when nothing fits the budget.
int print_plan(Network& network, Backend& backend, const TrainerOptions& options, const memory::MemoryStack& stack);
// The plan of a loaded model's inference, for micro-batches up to options.max_batch. Returns 0,
// or 3 when not even one image fits the budget.
int print_inference_plan(Network& network, Backend& backend, const InferenceOptions& options);

}  // namespace cnn::app
