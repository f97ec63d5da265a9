#pragma once
// The table of bytes by category that the engine prints before step 1, and that a refusal to
// train under a budget carries; and what a step may recompute to lower them.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <cnnengine/engine/core/backend_types.hpp>
#include <cnnengine/memory/memory_resource.hpp>

namespace cnn {

// What a training step may recompute during backward instead of keeping it from forward
// (docs/design.md, "Recomputation"). Recomputation runs the same kernels on the same inputs: on
// the CPU the results are those of keeping, to the bit.
enum class RecomputePolicy {
  none,       // keep every output backward reads
  cheap,      // recompute element-wise and normalisation outputs wherever that lowers the peak
  automatic,  // "auto": under a budget, the least recomputation that fits each micro-batch, and
              // the micro-batch with the highest expected throughput
};

// "none", "cheap" or "auto"; anything else is a ConfigError naming them.
RecomputePolicy parse_recompute_policy(std::string_view word);
std::string to_string(RecomputePolicy policy);

// Where a step in bf16 or fp16 stores its values in 16 bits (engine/plan/detail/step_plan.cpp,
// Note [16-bit values]): where that makes the step's arena smaller than float32 values do, without
// recomputation (a network that keeps little for backward can come out larger: the float32 copies
// of one large layer outweigh what 16 bits save on the rest), or always.
enum class NarrowValues { where_smaller, always };

struct MemoryBreakdown {
  int micro_batch = 0;
  memory::CategoryBytes persistent;  // parameters, their gradients, optimizer state
  memory::CategoryBytes arena_peak;  // what is live in the step arena at its fullest moment
  std::size_t arena_bytes = 0;       // the arena the plan needs
  std::size_t lower_bound = 0;       // liveness lower bound of the arena
  std::size_t loader_staging = 0;    // the loader's prefetch buffers
  // The micro-batch's input copied ahead of its step (the trainer's input stager): a device
  // slot beside the arena and its pinned twin; 0 where copies do not overlap compute (the CPU).
  std::size_t input_staging = 0;
  std::size_t library = 0;           // bytes the backend's libraries hold
  std::size_t communication = 0;     // bytes a data-parallel run's communicator holds
  std::size_t budget = 0;            // 0: none
  std::size_t workspace_limit = 0;   // what one layer's workspace was allowed when planning
  // Recomputation (docs/design.md): the policy planned with, the layers recomputed during
  // backward (some more than once), what their recomputations add to a micro-batch's time, and
  // the optimizer steps' samples per second the planner's cost model expects at this micro-batch.
  RecomputePolicy recompute = RecomputePolicy::none;
  int recomputed_layers = 0;
  double recompute_fraction = 0;
  int in_place_layers = 0;  // layers whose output the plan writes over their input
  int fused_relus = 0;      // BatchNorms that run the ReLU after them in their own calls
  int fused_conv_relus = 0;  // convolutions that run the ReLU after them in their forward call
  ValueFormat values = ValueFormat::fp32;  // how the step stores the values between layers
  double expected_samples_per_second = 0;

  // Under a budget and a dynamic strategy (arena, pool, direct): whether the strategy itself,
  // replayed on this plan's buffers while planning, serves them in what the budget leaves it;
  // where it does not, why. Under a pool, arena_bytes is the most the pool holds, where that is
  // more than the plan's arena.
  bool strategy_serves = true;
  std::string strategy_refusal;
  int fused_adds = 0;  // of fused_relus, those that run a residual add before the ReLU too

  std::size_t total() const {
    return persistent.total() + arena_bytes + loader_staging + input_staging + library + communication;
  }
  bool fits() const { return budget == 0 || (total() <= budget && strategy_serves); }
};

std::string format_memory_table(const MemoryBreakdown& breakdown);
// One row of such a table (a name, its bytes, a note), so that every table lines up alike.
void append_table_row(std::string& table, const char* name, std::size_t bytes, const std::string& note = "");
// One row per candidate micro-batch: bytes by category, total, and whether it fits the budget.
std::string format_micro_batch_table(const std::vector<MemoryBreakdown>& rows);
// That table's header and one of its rows, without line ends, for tables that add columns.
std::string micro_batch_table_header();
std::string format_micro_batch_row(const MemoryBreakdown& breakdown);

}  // namespace cnn
