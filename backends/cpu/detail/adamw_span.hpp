#pragma once
// AdamW's update over a span of parameters (CpuBackend::adamw_update), on the widest vectors the
// host has. Every instruction set does the same operations in the same order (multiplies and
// adds unfused, square root and division correctly rounded), so a span's bits do not depend on
// the host's instructions or on where a thread's range starts.
#include <cstddef>

namespace cnn::cpu {

// One step's constants: p = p decay - step_size m / (sqrt(v) / sqrt_correction2 + epsilon), after
// m = beta1 m + (1 - beta1) g and v = beta2 v + (1 - beta2) g g.
struct AdamWStep {
  float decay, beta1, beta2, epsilon, step_size, sqrt_correction2;
};

// Elements [begin, end) of the parameters p, their gradients g and moments m and v.
void adamw_span(const AdamWStep& s, float* p, const float* g, float* m, float* v, std::size_t begin, std::size_t end);

}  // namespace cnn::cpu
