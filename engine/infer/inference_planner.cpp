#include "engine/infer/inference_planner.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

#include <cnnengine/base/error.hpp>
#include "engine/core/detail/input_stager.hpp"
#include <cnnengine/engine/core/parameter_store.hpp>
#include "engine/infer/detail/forward_slots.hpp"
#include "engine/infer/detail/inference_plan.hpp"
#include "engine/plan/detail/largest_fitting.hpp"
#include "engine/plan/detail/query_memory.hpp"
#include "engine/plan/detail/workspace_fitting.hpp"
#include <cnnengine/memory/memory_resource.hpp>

namespace cnn {
namespace {

InferencePlan plan_with_workspace(const InferencePlanner& planner, int micro_batch, std::size_t workspace_limit) {
  Network& net = planner.network();
  Backend& backend = planner.backend();
  const InferenceOptions& options = planner.options();
  InferencePlan p;
  const QueryMemoryScope scratch(backend, planner.query_memory());
  p.step = plan_step(net, backend, micro_batch, false, workspace_limit);
  MemoryBreakdown& m = p.breakdown;
  m.micro_batch = micro_batch;
  m.persistent = ParameterStore::planned_inference_bytes(net);
  m.persistent[memory::Category::other] += forward_slots_bytes(net.loss());
  m.arena_peak = p.step.plan.peak_by_category;
  m.arena_bytes = p.step.arena_bytes();
  m.lower_bound = p.step.plan.lower_bound_bytes;
  m.loader_staging = options.account.loader_staging();
  m.input_staging = InputStager::bytes_for(backend, net.input_shape().elements(), net.target_bytes(), micro_batch);
  m.library = options.account.libraries();
  m.budget = options.account.budget();
  m.workspace_limit = workspace_limit;
  return p;
}

}  // namespace

InferencePlan plan_inference(const InferencePlanner& planner, int micro_batch) {
  const InferenceOptions& options = planner.options();
  return plan_within_workspace_budget<InferencePlan>(
      options.workspace_limit, options.account.budget(),
      [&](std::size_t limit) { return plan_with_workspace(planner, micro_batch, limit); });
}

InferencePlanner::InferencePlanner(Network& network, Backend& backend, InferenceOptions options,
                                   memory::MemoryResource* query_memory)
    : net_(network), backend_(backend), options_(options), query_memory_(query_memory) {
  if (options_.max_batch <= 0)
    throw ConfigError("an inference's max_batch must be positive, got " + std::to_string(options_.max_batch));
  constexpr int kLargestBatch = 1 << 24;  // as a trainer's: sums of sample counts stay in an int
  if (options_.max_batch > kLargestBatch)
    throw ConfigError("an inference's max_batch of " + std::to_string(options_.max_batch) + ": at most " +
                      std::to_string(kLargestBatch) + " are taken");
  if (net_.size() <= 1) throw ConfigError("the network has no layers: nothing to run");
  if (options_.rewrite_graph) net_.commute_relu_and_max_pool();
}

MemoryBreakdown InferencePlanner::breakdown(int micro_batch) const {
  if (micro_batch <= 0) throw ConfigError("an inference plan for " + std::to_string(micro_batch) + " images");
  auto known = breakdowns_.find(micro_batch);
  if (known == breakdowns_.end())
    known = breakdowns_.emplace(micro_batch, plan_inference(*this, micro_batch).breakdown).first;
  return known->second;
}

int InferencePlanner::largest_fitting() const {
  const int most = largest_describable_micro_batch(net_, backend_, options_.max_batch);
  if (!options_.account.limited()) return most;
  return largest_fitting_micro_batch(1, most, [&](int b) { return breakdown(b).fits(); });
}

std::string format_inference_table(const MemoryBreakdown& m) {
  using memory::Category;
  using memory::format_bytes;
  std::string out;
  auto row = [&](const char* name, std::size_t bytes, const std::string& note = "") {
    append_table_row(out, name, bytes, note);
  };
  out += "inference plan for micro-batch " + std::to_string(m.micro_batch) +
         " (forward only: each activation given back after its last reader)\n";
  row("parameters", m.persistent[Category::parameters],
      "with the running statistics; no gradients, no optimizer state");
  row("activations", m.arena_peak[Category::activations], "at the forward pass's peak");
  row("workspace", m.arena_peak[Category::workspace] + m.library,
      m.library ? "incl. " + format_bytes(m.library) + " held by libraries" : "at the forward pass's peak");
  row("data staging", m.arena_peak[Category::data_staging] + m.input_staging + m.loader_staging,
      "input slots" +
          (m.input_staging ? " (" + format_bytes(m.input_staging) + " to copy the next ahead)" : std::string()) +
          " + " + format_bytes(m.loader_staging) + " loader prefetch");
  row("planning slack", m.arena_bytes - m.lower_bound);
  char ratio[64];
  std::snprintf(ratio, sizeof ratio, "%.3f x the liveness lower bound %s",
                m.lower_bound ? double(m.arena_bytes) / double(m.lower_bound) : 1.0,
                format_bytes(m.lower_bound).c_str());
  row("arena", m.arena_bytes, ratio);
  row("total", m.total());
  if (m.budget) row("budget", m.budget, m.fits() ? "fits" : "DOES NOT FIT");
  return out;
}

}  // namespace cnn
