#include "backends/cpu/detail/gemm.hpp"

#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "backends/cpu/detail/parallel.hpp"

namespace cnn::cpu {
namespace {

using Eigen::Index;

// Note [Fixed cache sizes]: Eigen sizes its product blocks from the cache sizes it reads with
// cpuid, and the blocks set both the packing a layer's workspace holds and the order in which a
// product's sums are rounded. Left to the host, the same seed planned other bytes and trained
// other losses on a machine with other caches. Fixed sizes (those of the 2-core AMD EPYC the
// recorded results come from) make plans and losses depend on the instruction set alone.
constexpr std::ptrdiff_t kL1Bytes = 48 << 10, kL2Bytes = 1 << 20, kL3Bytes = std::ptrdiff_t{384} << 20;

void fix_cache_sizes() {
  static const bool fixed = [] {
    Eigen::setCpuCacheSizes(kL1Bytes, kL2Bytes, kL3Bytes);
    return true;
  }();
  (void)fixed;
}

// Eigen computes column-major products, so C[m x n] row-major is computed as its transpose,
// C^T[n x m] = op(B)^T[n x k] * op(A)^T[k x m], each row-major operand read as column-major.
// Blocks: kc along k, mc along Eigen's rows (n), nc along its columns (m).
class Blocking final : public Eigen::internal::level3_blocking<float, float> {
 public:
  Blocking(std::size_t m, std::size_t n, std::size_t k) {
    fix_cache_sizes();
    m_kc = static_cast<Index>(k);
    m_mc = static_cast<Index>(n);
    m_nc = static_cast<Index>(m);
    Eigen::internal::computeProductBlockingSizes<float, float, 1, Index>(m_kc, m_mc, m_nc, 1);
  }
  std::size_t floats() const { return a_floats() + aligned_floats(static_cast<std::size_t>(m_kc * m_nc)); }
  // Smaller blocks until they fit `packing` (any block sizes are correct, only slower).
  void fit(const Packing& packing) {
    if (reinterpret_cast<std::uintptr_t>(packing.data) % 64 != 0)
      throw std::logic_error("gemm: packing at " + std::to_string(reinterpret_cast<std::uintptr_t>(packing.data)) +
                             " is not 64-byte aligned");
    while (floats() > packing.floats && (m_mc > 1 || m_nc > 1)) {
      if (m_mc >= m_nc) m_mc = (m_mc + 1) / 2;
      else m_nc = (m_nc + 1) / 2;
    }
    while (floats() > packing.floats && m_kc > 1) m_kc = (m_kc + 1) / 2;
    if (floats() > packing.floats)
      throw std::logic_error("gemm: " + std::to_string(packing.floats) + " floats of packing, " +
                             std::to_string(floats()) + " needed");
    m_blockA = packing.data;
    m_blockB = packing.data + a_floats();
  }

 private:
  std::size_t a_floats() const { return aligned_floats(static_cast<std::size_t>(m_kc * m_mc)); }
};

template <int LhsOrder, int RhsOrder>
void run(Index rows, Index cols, Index depth, const float* lhs, Index lhs_stride, const float* rhs, Index rhs_stride,
         float* res, Index res_stride, Blocking& blocking) {
  Eigen::internal::general_matrix_matrix_product<Index, float, LhsOrder, false, float, RhsOrder, false,
                                                 Eigen::ColMajor, 1>::run(rows, cols, depth, lhs, lhs_stride, rhs,
                                                                          rhs_stride, res, 1, res_stride, 1.0f,
                                                                          blocking, nullptr);
}

}  // namespace

std::size_t gemm_packing_floats(std::size_t m, std::size_t n, std::size_t k) { return Blocking(m, n, k).floats(); }

void gemm(std::size_t m, std::size_t n, std::size_t k, GemmOperand a, GemmOperand b, GemmOutput c, Packing packing) {
  if (m == 0 || n == 0) return;
  if (!c.accumulate)
    for (std::size_t i = 0; i < m; ++i) std::fill_n(c.data + i * c.stride, n, 0.f);
  if (k == 0) return;
  Blocking blocking(m, n, k);
  blocking.fit(packing);
  // Lhs = op(B)^T: column-major [n x k] when B is stored [k x n], row-major when stored [n x k].
  // Rhs = op(A)^T: column-major [k x m] when A is stored [m x k], row-major when stored [k x m].
  const auto rows = static_cast<Index>(n), cols = static_cast<Index>(m), depth = static_cast<Index>(k);
  const auto lhs_stride = static_cast<Index>(b.stride), rhs_stride = static_cast<Index>(a.stride);
  const auto res_stride = static_cast<Index>(c.stride);
  if (!b.transposed && !a.transposed)
    run<Eigen::ColMajor, Eigen::ColMajor>(rows, cols, depth, b.data, lhs_stride, a.data, rhs_stride, c.data, res_stride, blocking);
  else if (!b.transposed)
    run<Eigen::ColMajor, Eigen::RowMajor>(rows, cols, depth, b.data, lhs_stride, a.data, rhs_stride, c.data, res_stride, blocking);
  else if (!a.transposed)
    run<Eigen::RowMajor, Eigen::ColMajor>(rows, cols, depth, b.data, lhs_stride, a.data, rhs_stride, c.data, res_stride, blocking);
  else
    run<Eigen::RowMajor, Eigen::RowMajor>(rows, cols, depth, b.data, lhs_stride, a.data, rhs_stride, c.data, res_stride, blocking);
}

std::size_t parallel_gemm_packing_floats(int threads, std::size_t m, std::size_t n, std::size_t k) {
  const int count = range_threads(threads, m);
  std::size_t per_thread = 0;  // for the rows parallel_ranges gives each thread
  for (int t = 0; t < count; ++t)
    per_thread = std::max(per_thread, gemm_packing_floats(range_begin(m, t + 1, count) - range_begin(m, t, count), n, k));
  return per_thread * static_cast<std::size_t>(count);
}

void parallel_gemm(int threads, std::size_t m, std::size_t n, std::size_t k, GemmOperand a, GemmOperand b,
                   GemmOutput c, Packing packing) {
  const int count = range_threads(threads, m);
  const std::size_t per_thread = packing.floats / static_cast<std::size_t>(count) / 16 * 16;  // aligned slices
  parallel_ranges(count, m, [&](int t, std::size_t begin, std::size_t end) {
    GemmOperand rows_of_a = a;
    rows_of_a.data += a.transposed ? begin : begin * a.stride;  // A^T stored [k x m]: a column offset
    GemmOutput rows_of_c = c;
    rows_of_c.data += begin * c.stride;
    gemm(end - begin, n, k, rows_of_a, b, rows_of_c, Packing{packing.data + static_cast<std::size_t>(t) * per_thread, per_thread});
  });
}

}  // namespace cnn::cpu
