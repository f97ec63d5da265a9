#pragma once
// The planner's estimate of a step's time, to rank plans against each other (docs/design.md,
// "Recomputation"): never a measurement. A backend call of a layer on b samples takes
//
//   seconds_per_call + b * max(flops / flops_per_second, bytes / bytes_per_second)
//
// from the layer's forward cost per sample (Layer::forward_cost) and the backend's rates
// (Backend::compute_rates): a roofline with a fixed cost per call. A layer's backward takes two
// such calls (the input gradient and the parameter gradients: twice the work of forward, Chen et
// al. 2016 and Checkmate count the same); a recomputation one; the loss one.
#include <vector>

#include <cnnengine/engine/core/backend.hpp>
#include <cnnengine/engine/core/network.hpp>

namespace cnn {

class CostModel {
 public:
  CostModel(const Network& network, ComputeRates rates);

  // One forward call of node `id` on `samples` samples (0 for a view: it never runs).
  double forward_seconds(int id, int samples) const;
  // Forward, loss and backward of one micro-batch, without recomputation.
  double step_seconds(int samples) const;
  // The recomputations of `nodes` on one micro-batch.
  double recompute_seconds(const std::vector<int>& nodes, int samples) const;
  // What recomputing `nodes` adds, as a fraction of a micro-batch's time without it.
  double extra_fraction(const std::vector<int>& nodes, int samples) const;
  // Expected samples per second of optimizer steps of `batch` samples at `micro_batch`, split as
  // the trainer splits them (the training need of `need` samples), recomputing `nodes`.
  double throughput(int batch, int micro_batch, int need, const std::vector<int>& nodes) const;

 private:
  double call_seconds(const LayerCost& cost, int samples) const;
  std::vector<LayerCost> costs_;  // by node; empty for the input and views
  std::vector<bool> runs_;        // by node: a layer that runs (not the input, not a view)
  std::vector<bool> backward_;    // by node: a layer that runs backward too (not frozen)
  ComputeRates rates_;
};

}  // namespace cnn
