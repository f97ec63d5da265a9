#pragma once
// Caffe-style gradient checking: the objective is sum(y * r) for a fixed random r, so the
// analytic input and parameter gradients come from one backward pass with dy = r, and each is
// compared with a central finite difference of the objective.
#include <catch2/catch.hpp>
#include <cstdint>
#include <memory>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include <cnnengine/engine/core/layer.hpp>

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

// A Catch2 check that the layer's input and parameter gradients agree with the finite
// differences within `tolerance`, writing dx and adding to it.
inline void require_close(Layer& layer, const std::vector<Shape>& shapes, GradientCheckOptions options = {},
                          double tolerance = 1e-2) {
  for (bool accumulate : {false, true}) {
    options.accumulate = accumulate;
    const GradientCheckResult r = check_gradients(layer, shapes, options);
    INFO(layer.describe() << (accumulate ? " (accumulating)" : "") << ": input error " << r.worst_input_error
                          << ", parameter error " << r.worst_param_error);
    CHECK(r.checked > 0);
    CHECK(r.worst_input_error < tolerance);
    CHECK(r.worst_param_error < tolerance);
  }
}

}  // namespace cnn::testing
