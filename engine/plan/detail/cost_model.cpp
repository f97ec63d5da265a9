#include "engine/plan/detail/cost_model.hpp"

#include <algorithm>

#include <cnnengine/engine/core/backend.hpp>
#include "engine/plan/batch_planner.hpp"

namespace cnn {

CostModel::CostModel(const Network& net, ComputeRates rates)
    : costs_(static_cast<std::size_t>(net.size())),
      runs_(static_cast<std::size_t>(net.size()), false),
      backward_(static_cast<std::size_t>(net.size()), false),
      rates_(rates) {
  for (int id = 1; id < net.size(); ++id) {
    const Layer& layer = *net.node(id).layer;
    if (layer.is_view()) continue;
    costs_[static_cast<std::size_t>(id)] = layer.forward_cost();
    runs_[static_cast<std::size_t>(id)] = true;
    backward_[static_cast<std::size_t>(id)] = !net.frozen(id);
  }
}

double CostModel::call_seconds(const LayerCost& cost, int samples) const {
  const double work = std::max(rates_.flops_per_second > 0 ? cost.flops / rates_.flops_per_second : 0.0,
                               rates_.bytes_per_second > 0 ? cost.bytes / rates_.bytes_per_second : 0.0);
  return rates_.seconds_per_call + samples * work;
}

double CostModel::forward_seconds(int id, int samples) const {
  const auto i = static_cast<std::size_t>(id);
  return runs_[i] ? call_seconds(costs_[i], samples) : 0.0;
}

double CostModel::step_seconds(int samples) const {
  double seconds = call_seconds(LayerCost{}, samples);  // the loss
  for (std::size_t i = 0; i < costs_.size(); ++i)
    if (runs_[i]) seconds += (backward_[i] ? 3 : 1) * call_seconds(costs_[i], samples);  // forward, backward's two calls
  return seconds;
}

double CostModel::recompute_seconds(const std::vector<int>& nodes, int samples) const {
  double seconds = 0;
  for (int id : nodes) seconds += forward_seconds(id, samples);
  return seconds;
}

double CostModel::extra_fraction(const std::vector<int>& nodes, int samples) const {
  return recompute_seconds(nodes, samples) / step_seconds(samples);
}

double CostModel::throughput(int batch, int micro_batch, int need, const std::vector<int>& nodes) const {
  const MicroBatchSplit split = split_into_micro_batches(batch, micro_batch, need);
  double seconds = 0;
  for (int j = 0; j < split.count; ++j) seconds += step_seconds(split.size(j)) + recompute_seconds(nodes, split.size(j));
  return batch / seconds;
}

}  // namespace cnn
