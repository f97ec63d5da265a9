#pragma once
// Caffe-style gradient checking: the objective is sum(y * r) for a fixed random r, so the
// analytic input and parameter gradients come from one backward pass with dy = r, and each is
// compared with a central finite difference of the objective.
#include <memory>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "engine/core/layer.hpp"

namespace cnn::testing {

struct GradientCheckResult {
  double worst_input_error = 0;  // relative: |analytic - numeric| / max(1, |analytic|, |numeric|)
  double worst_param_error = 0;
  std::size_t checked = 0;
};

struct GradientCheckOptions {
  int batch = 3;
  float step = 1e-2f;
  bool training = true;
  bool accumulate = false;  // backward adds to a pre-filled dx: checks the accumulate path too
  std::size_t max_checks_per_tensor = 60;
  std::uint64_t seed = 7;
  const CrossRankContext* cross_rank = nullptr;  // synchronised BatchNorm's path
};

GradientCheckResult check_gradients(Layer& layer, const std::vector<Shape>& input_shapes, const GradientCheckOptions& options);

}  // namespace cnn::testing
