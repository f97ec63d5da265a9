#include "plan_report.hpp"

#include <cstdio>
#include <iostream>
#include <string>

#include <cnnengine/engine/core/backend.hpp>
#include "engine/train/planning_options.hpp"
#include <cnnengine/memory/memory_resource.hpp>

namespace cnn::app {
namespace {

constexpr RecomputePolicy kPolicies[] = {RecomputePolicy::none, RecomputePolicy::cheap, RecomputePolicy::automatic};

std::string cell(const MemoryBreakdown& m) {
  char text[96];
  std::snprintf(text, sizeof text, "%11s %3d %6.1f%% %-3s", memory::format_bytes(m.total()).c_str(),
                m.recomputed_layers, 100.0 * m.recompute_fraction, m.budget == 0 ? "-" : m.fits() ? "yes" : "no");
  return text;
}

// For each micro-batch and policy: total bytes, layers recomputed, the compute they add, fits.
void print_policies(const BatchPlanner& planner, const std::vector<int>& sizes) {
  std::cout << "recomputation by policy: total bytes, layers recomputed in backward, the compute they add, fits\n"
            << "  micro-batch";
  for (RecomputePolicy policy : kPolicies) {
    char head[40];
    std::snprintf(head, sizeof head, " | %-26s", to_string(policy).c_str());
    std::cout << head;
  }
  std::cout << "\n";
  for (int b : sizes) {
    char first[16];
    std::snprintf(first, sizeof first, "  %11d", b);
    std::cout << first;
    for (RecomputePolicy policy : kPolicies) std::cout << " | " << cell(planner.breakdown(b, policy));
    std::cout << "\n";
  }
}

int micro_batches(int batch, int micro_batch) { return (batch + micro_batch - 1) / micro_batch; }

// The same plan with the values between layers in float32 and in 16 bits (--precision bf16 or
// fp16 stores them so where the plan comes out smaller): the bytes by category at micro-batch b
// and, under a budget, the largest micro-batch.
void print_value_formats(const BatchPlanner& planner, int b) {
  const ValueFormat own = planner.breakdown(b).values;
  const ValueFormat wanted = planner.options().values;
  const ValueFormat narrow = wanted == ValueFormat::fp32 ? ValueFormat::bf16 : wanted;
  if (wanted == ValueFormat::fp32 && planner.backend().kind() == DeviceKind::cuda) return;  // no 16-bit runs there yet
  const bool budget = planner.options().account.limited();
  std::cout << "by how values are stored (bf16 and fp16 store those between layers in 16 bits where that is smaller):\n"
            << "  values" << micro_batch_table_header() << (budget ? "  largest" : "") << "\n";
  for (ValueFormat values : {ValueFormat::fp32, narrow}) {
    BatchPlanOptions options = planner.options();
    options.values = values;
    options.narrow_values = NarrowValues::always;
    options.rewrite_graph = false;  // the planner's network is rewritten already
    const BatchPlanner other(planner.network(), planner.backend(), options);
    char name[16];
    std::snprintf(name, sizeof name, "  %6s", to_string(values).c_str());
    std::cout << name << format_micro_batch_row(other.breakdown(b));
    if (budget) std::cout << "  " << other.largest_fitting(options.batch);
    std::cout << (values == own ? "  <- this run" : "") << "\n";
  }
}

// With frozen layers: this run's plan at micro-batch b beside the same network's with every layer
// training (no gradients, optimizer state or saved activations for the frozen ones), and under a
// budget the largest micro-batch of each.
void print_frozen(Network& network, Backend& backend, const TrainerOptions& t, const memory::MemoryStack& stack,
                  const BatchPlanner& planner, int b) {
  const int through = network.frozen_through();
  if (through == 0) return;
  const bool budget = planner.options().account.limited();
  struct Row {
    MemoryBreakdown at_b;
    int largest;
  };
  const Row frozen{planner.breakdown(b), budget ? planner.largest_fitting(t.batch) : 0};
  const Row every = [&] {
    const UnfrozenWhile unfrozen(network);
    BatchPlanOptions options = planning_options(t, network, backend, stack);
    options.rewrite_graph = false;  // the planner's network is rewritten already
    const BatchPlanner all(network, backend, options);
    return Row{all.breakdown(b), budget ? all.largest_fitting(t.batch) : 0};
  }();
  std::cout << "frozen nodes 1 to " << through << ": no gradients, optimizer state or saved activations for them\n"
            << "  training   " << micro_batch_table_header() << (budget ? "  largest" : "") << "\n";
  for (const Row* row : {&frozen, &every}) {
    const std::string name = row == &frozen ? "  frozen 1-" + std::to_string(through) : "  every layer";
    char first[24];
    std::snprintf(first, sizeof first, "%-13s", name.c_str());
    std::cout << first << format_micro_batch_row(row->at_b);
    if (budget) std::cout << "  " << row->largest;
    std::cout << (row == &frozen ? "  <- this run" : "") << "\n";
  }
}

// Why auto chose its micro-batch: each one weighed, with the cost model's expected throughput.
void print_weighed(const BatchPlanner& planner, int chosen) {
  const int batch = planner.options().batch;
  std::cout << "auto weighed (expected samples per second from the cost model, docs/design.md):\n";
  for (const MemoryBreakdown& m : planner.weighed_micro_batches()) {
    char line[200];
    std::snprintf(line, sizeof line, "  micro-batch %5d: %3d per step, %3d layers recomputed (+%.1f%% compute), %s, "
                                     "%.0f samples/s%s\n",
                  m.micro_batch, micro_batches(batch, m.micro_batch), m.recomputed_layers, 100.0 * m.recompute_fraction,
                  memory::format_bytes(m.total()).c_str(), m.expected_samples_per_second,
                  m.micro_batch == chosen ? "  <- chosen: the highest" : "");
    std::cout << line;
  }
}

}  // namespace

int print_plan(Network& network, Backend& backend, const TrainerOptions& t, const memory::MemoryStack& stack) {
  const BatchPlanner planner(network, backend, planning_options(t, network, backend, stack));
  std::vector<int> sizes;
  for (int b = 1; b < t.batch; b *= 2) sizes.push_back(b);
  sizes.push_back(t.batch);
  std::vector<MemoryBreakdown> rows;
  for (int b : sizes) rows.push_back(planner.breakdown(b));
  std::cout << "recomputation: " << to_string(t.recompute) << "\n" << format_micro_batch_table(rows);
  print_policies(planner, sizes);
  if (t.memory_budget) {
    std::cout << "largest micro-batch that fits, by policy:";
    for (RecomputePolicy policy : kPolicies)
      std::cout << " " << to_string(policy) << " " << planner.largest_fitting(t.batch, policy);
    std::cout << "\n";
  }
  const int largest = planner.largest_fitting(t.batch);
  if (largest == 0) {
    std::cout << "no micro-batch fits the budget of " << memory::format_bytes(t.memory_budget) << "\n";
    return 3;
  }
  std::cout << "largest micro-batch that fits: " << largest
            << (t.memory_budget ? "" : " (no budget: the requested batch)") << "\n";
  if (planner.smallest_micro_batch() > 1)
    std::cout << "smallest micro-batch: " << planner.smallest_micro_batch() << ", because "
              << planner.training_batch_need().why << "\n";
  const int b = planner.choose();
  if (b == 0) {
    std::cout << "the micro-batch asked for does not fit the budget\n";
    return 3;
  }
  if (t.recompute == RecomputePolicy::automatic && planner.asked_micro_batch() == 0) {
    if (t.memory_budget) print_weighed(planner, b);
    else std::cout << "auto without a budget recomputes nothing: the whole batch at once\n";
  }
  const MicroBatchSplit split = split_into_micro_batches(t.batch, b, planner.training_batch_need().samples);
  std::cout << "chosen: batch " << t.batch << " = " << split.count << " x micro-batch " << b;
  if (split.before_last != b) std::cout << " (the last two " << split.before_last << " and " << split.last << ")";
  else if (split.last != b) std::cout << " (the last one " << split.last << ")";
  std::cout << "\n" << format_memory_table(planner.breakdown(b));
  print_value_formats(planner, b);
  print_frozen(network, backend, t, stack, planner, b);
  return 0;
}

int print_inference_plan(Network& network, Backend& backend, const InferenceOptions& o) {
  const InferencePlanner planner(network, backend, o);
  std::vector<MemoryBreakdown> rows;
  for (int b = 1; b < o.max_batch; b *= 2) rows.push_back(planner.breakdown(b));
  rows.push_back(planner.breakdown(o.max_batch));
  std::cout << "inference: forward only, no gradients, no optimizer state\n" << format_micro_batch_table(rows);
  const int b = planner.largest_fitting();
  if (b == 0) {
    std::cout << "not one image fits the budget of " << memory::format_bytes(o.account.budget()) << "\n"
              << format_inference_table(planner.breakdown(1));
    return 3;
  }
  std::cout << "largest micro-batch that fits: " << b
            << (o.account.budget() ? "" : " (no budget: the batch asked for)") << "\n"
            << format_inference_table(planner.breakdown(b));
  return 0;
}

}  // namespace cnn::app
