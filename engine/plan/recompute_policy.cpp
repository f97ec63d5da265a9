#include <cnnengine/engine/plan/memory_report.hpp>

#include <cnnengine/base/error.hpp>

namespace cnn {

RecomputePolicy parse_recompute_policy(std::string_view word) {
  for (RecomputePolicy policy : {RecomputePolicy::none, RecomputePolicy::cheap, RecomputePolicy::automatic})
    if (word == to_string(policy)) return policy;
  throw ConfigError("unknown recomputation policy '" + std::string(word) + "': use none, cheap or auto");
}

std::string to_string(RecomputePolicy policy) {
  switch (policy) {
    case RecomputePolicy::none: return "none";
    case RecomputePolicy::cheap: return "cheap";
    case RecomputePolicy::automatic: return "auto";
  }
  return "none";
}

}  // namespace cnn
