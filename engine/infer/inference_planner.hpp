#pragma once
// The plan of an inference: forward only, from the plans alone, before anything is allocated.
// Each activation's buffer is given back after its last reader has run (the step plan's
// forward-only mode, engine/plan/detail/step_plan.hpp), so the arena holds about the largest
// pair of adjacent activations, not all of them; nothing is kept for a backward pass, there are
// no gradients and no optimizer state. A Predictor and `train_images --evaluate --plan` ask it.
#include <cstddef>
#include <map>

#include <cnnengine/engine/core/network.hpp>
#include <cnnengine/engine/infer/predictor.hpp>  // InferenceOptions
#include <cnnengine/engine/plan/memory_report.hpp>
#include <cnnengine/memory/memory_stack.hpp>

namespace cnn {

// Not thread-safe: it keeps what it planned.
class InferencePlanner {
 public:
  // Throws ConfigError for a max_batch below 1 or byte counts beyond any memory. `query_memory`:
  // where the backend's workspace queries take their scratch while this planner plans (the
  // predictor's budget: Backend::set_query_memory); null: the backend's device memory.
  InferencePlanner(Network& network, Backend& backend, InferenceOptions options,
                   memory::MemoryResource* query_memory = nullptr);

  // The bytes of a forward pass of b images: the parameters (with their running statistics),
  // the arena, the input's staging, the loader's, the libraries'. Under a budget, each layer's
  // workspace is lowered until the plan fits where the backend has leaner methods.
  MemoryBreakdown breakdown(int micro_batch) const;
  // The largest micro-batch, at most max_batch, whose plan fits the budget (max_batch without
  // one); 0 where not even one image fits.
  int largest_fitting() const;

  const InferenceOptions& options() const { return options_; }
  Network& network() const { return net_; }
  Backend& backend() const { return backend_; }
  memory::MemoryResource* query_memory() const { return query_memory_; }

 private:
  Network& net_;
  Backend& backend_;
  InferenceOptions options_;
  memory::MemoryResource* query_memory_;
  mutable std::map<int, MemoryBreakdown> breakdowns_;
};

// The byte table of an inference plan: its own rows (no gradients, no optimizer state, nothing
// recomputed).
std::string format_inference_table(const MemoryBreakdown& breakdown);

}  // namespace cnn
