#pragma once
// What a training step may recompute during backward instead of keeping it from forward
// (docs/design.md, "Recomputation"). Recomputation runs the same kernels on the same inputs: on
// the CPU the results are those of keeping, to the bit.
#include <string>
#include <string_view>

namespace cnn {

enum class RecomputePolicy {
  none,       // keep every output backward reads
  cheap,      // recompute element-wise and normalisation outputs wherever that lowers the peak
  automatic,  // "auto": under a budget, the least recomputation that fits each micro-batch, and
              // the micro-batch with the highest expected throughput
};

// "none", "cheap" or "auto"; anything else is a ConfigError naming them.
RecomputePolicy parse_recompute_policy(std::string_view word);
std::string to_string(RecomputePolicy policy);

}  // namespace cnn
