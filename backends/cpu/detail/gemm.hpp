#pragma once
// Matrix products on Eigen's kernels, with the packing buffers Eigen needs handed in by the
// caller from the step's planned workspace: Eigen's own products malloc them on every call,
// and a training step must allocate nothing.
//
// Row-major operands throughout: C[m x n] = (or +=) op(A)[m x k] * op(B)[k x n].
#include <cstddef>

namespace cnn::cpu {

struct GemmOperand {
  const float* data = nullptr;
  std::size_t stride = 0;   // floats from one stored row to the next
  bool transposed = false;  // op(X) = stored^T: A stored [k x m], B stored [n x k]
};

struct GemmOutput {
  float* data = nullptr;
  std::size_t stride = 0;
  bool accumulate = false;  // add to C instead of overwriting it
};

struct Packing {
  float* data = nullptr;  // 64-byte aligned
  std::size_t floats = 0;
};

// Packing floats for one product of these sizes: what Eigen's own blocking would take.
std::size_t gemm_packing_floats(std::size_t m, std::size_t n, std::size_t k);

// One thread. Runs with less packing than gemm_packing_floats asks (smaller blocks) when given
// less; needs at least 2 * k floats.
void gemm(std::size_t m, std::size_t n, std::size_t k, GemmOperand a, GemmOperand b, GemmOutput c, Packing packing);

// The rows of C split over `threads` threads, each with its own packing. The packing the
// split needs, and the product itself (packing holds that many floats).
std::size_t parallel_gemm_packing_floats(int threads, std::size_t m, std::size_t n, std::size_t k);
void parallel_gemm(int threads, std::size_t m, std::size_t n, std::size_t k, GemmOperand a, GemmOperand b,
                   GemmOutput c, Packing packing);

// n rounded up to whole 64-byte lines, so that carved buffers stay aligned for Eigen's kernels.
constexpr std::size_t aligned_floats(std::size_t n) { return (n + 15) / 16 * 16; }

}  // namespace cnn::cpu
