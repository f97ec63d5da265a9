#pragma once
// Matrix products in float on kernels of our own, with the packing buffers handed in by the
// caller from the step's planned workspace (a training step allocates nothing). The instruction
// set is chosen when the product runs (AVX-512, else AVX2 with FMA, else portable C++), and every
// one gives the same bits (Note [One product on every instruction set], gemm.cpp).
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

// The kernels compute C in tiles of kGemmRows x kGemmCols and sum k in blocks of kGemmDepth.
constexpr std::size_t kGemmRows = 8, kGemmCols = 48, kGemmDepth = 192;

// B given by what packs it instead of its storage: `pack` writes rows [k0, k0 + depth) of
// columns [j0, j0 + cols) of op(B) as panels of kGemmCols columns, [panel][depth][kGemmCols],
// with zeros in the columns past the product's n. A convolution packs its image this way,
// without an im2col matrix in between.
struct GemmPanels {
  void (*pack)(const void* context, std::size_t k0, std::size_t depth, std::size_t j0, std::size_t cols,
               float* dst) = nullptr;
  const void* context = nullptr;
};

// Whether a product with B stored computes C^T = B^T A^T instead, its n being narrow beside its m
// (Note [The narrow side as B], gemm.cpp). A product whose B comes from a GemmPanels cannot, so
// a caller with such a product stores B.
bool gemm_swaps(std::size_t m, std::size_t n);

// For a GemmPanels packer: panel[p * kGemmCols + l] = lines[l * stride + p], kGemmCols lines of
// `depth` values each, transposed a square of vector lanes at a time.
void transpose_into_panel(const float* lines, std::size_t stride, std::size_t depth, float* panel);

// Packing floats for one product of these sizes, B stored or given by its packer.
std::size_t gemm_packing_floats(std::size_t m, std::size_t n, std::size_t k);
std::size_t gemm_panels_packing_floats(std::size_t m, std::size_t n, std::size_t k);

// One thread. Runs with less packing than gemm_packing_floats asks (smaller blocks) when given
// less, at least 48 floats: fewer rows or columns a block give the same bits, fewer values of k
// (too little packing for kGemmDepth of them) other sums, so the plan gives what it asks.
void gemm(std::size_t m, std::size_t n, std::size_t k, GemmOperand a, GemmOperand b, GemmOutput c, Packing packing);
void gemm(std::size_t m, std::size_t n, std::size_t k, GemmOperand a, GemmPanels b, GemmOutput c, Packing packing);

// Products that share their A (a layer's weights, the same for each image of a micro-batch) take it
// packed once (Note [Operands packed once], gemm.cpp): pack_shared_a packs op(A) [m x k] for
// products of these sizes, B stored or (b_from_panels) given by its packer, on `threads` threads,
// into shared_a_floats(...) floats at `dst`, 64-byte aligned; the gemm overloads taking the
// SharedA read it, with gemm_shared_a_packing_floats(...) floats of packing each, and give the
// bits the products packing A themselves give.
struct SharedA {
  explicit SharedA(const float* packed, std::size_t m, std::size_t n, std::size_t k, bool b_from_panels)
      : packed(packed), m(m), n(n), k(k), b_from_panels(b_from_panels) {}
  const float* packed;
  std::size_t m, n, k;  // the products it was packed for
  bool b_from_panels;
};
std::size_t shared_a_floats(std::size_t m, std::size_t n, std::size_t k, bool b_from_panels);
std::size_t gemm_shared_a_packing_floats(std::size_t m, std::size_t n, std::size_t k, bool b_from_panels);
SharedA pack_shared_a(int threads, std::size_t m, std::size_t n, std::size_t k, bool b_from_panels, GemmOperand a,
                      float* dst);
void gemm(std::size_t m, std::size_t n, std::size_t k, SharedA a, GemmOperand b, GemmOutput c, Packing packing);
void gemm(std::size_t m, std::size_t n, std::size_t k, SharedA a, GemmPanels b, GemmOutput c, Packing packing);

// The rows of C split over `threads` threads, each with its own packing. The packing the
// split needs, and the product itself (packing holds that many floats).
std::size_t parallel_gemm_packing_floats(int threads, std::size_t m, std::size_t n, std::size_t k);
void parallel_gemm(int threads, std::size_t m, std::size_t n, std::size_t k, GemmOperand a, GemmOperand b,
                   GemmOutput c, Packing packing);

// n rounded up to whole 64-byte lines, so that carved buffers stay aligned for the kernels.
constexpr std::size_t aligned_floats(std::size_t n) { return (n + 15) / 16 * 16; }

}  // namespace cnn::cpu
