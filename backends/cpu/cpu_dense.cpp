// Dense layers as one matrix product each, its rows spread over threads, with the packing
// buffers from the layer's planned workspace (backends/cpu/detail/gemm.hpp).
#include <Eigen/Core>
#include <algorithm>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/detail/gemm.hpp"
#include "backends/cpu/detail/subnormals.hpp"

namespace cnn {
namespace {

using cpu::GemmOperand;
using cpu::GemmOutput;

// The packing a layer's workspace holds. It was planned for the plan's micro-batch; a smaller
// last one may want other block sizes, and gemm fits its blocks to what there is.
cpu::Packing packing_of(const Workspace& ws) { return {static_cast<float*>(ws.data), ws.bytes / sizeof(float)}; }

}  // namespace

std::size_t CpuBackend::dense_workspace_bytes(const Shape& x, int out, ConvPass pass) {
  const std::size_t n = static_cast<std::size_t>(x[0]), in = x.elements() / n, units = static_cast<std::size_t>(out);
  if (pass == ConvPass::forward) return cpu::parallel_gemm_packing_floats(threads_, n, units, in) * sizeof(float);
  return std::max(cpu::parallel_gemm_packing_floats(threads_, n, in, units),        // dx[n x in] = dy w
                  cpu::parallel_gemm_packing_floats(threads_, units, in, n)) *  // dw[out x in] += dy^T x
         sizeof(float);
}

void CpuBackend::dense_forward(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y, Workspace ws) {
  const std::size_t n = static_cast<std::size_t>(x.n()), in = x.sample_elements(), out = y.sample_elements();
  const cpu::Packing packing = packing_of(ws);
  // y[n x out] = x[n x in] w^T, w stored [out x in]
  cpu::parallel_gemm(threads_, n, out, in, GemmOperand{x.data, in}, GemmOperand{w.data, in, true}, GemmOutput{y.data, out},
                     packing);
  const cpu::FlushSubnormals flush;  // the products flush on their own threads (parallel_ranges)
  if (!bias.empty())
    Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(y.data, x.n(), static_cast<Eigen::Index>(out))
        .rowwise() += Eigen::Map<const Eigen::RowVectorXf>(bias.data, static_cast<Eigen::Index>(out));
}

void CpuBackend::dense_backward_data(const Tensor& dy, const Tensor& w, Tensor dx, bool accumulate, Workspace ws) {
  const std::size_t n = static_cast<std::size_t>(dy.n()), in = dx.sample_elements(), out = dy.sample_elements();
  const cpu::Packing packing = packing_of(ws);
  // dx[n x in] = dy[n x out] w[out x in]
  cpu::parallel_gemm(threads_, n, in, out, GemmOperand{dy.data, out}, GemmOperand{w.data, in},
                     GemmOutput{dx.data, in, accumulate}, packing);
}

void CpuBackend::dense_backward_weights(const Tensor& x, const Tensor& dy, Tensor dw, Tensor dbias, Workspace ws) {
  const std::size_t n = static_cast<std::size_t>(x.n()), in = x.sample_elements(), out = dy.sample_elements();
  const cpu::Packing packing = packing_of(ws);
  // dw[out x in] += dy^T[out x n] x[n x in], dy stored [n x out]
  cpu::parallel_gemm(threads_, out, in, n, GemmOperand{dy.data, out, true}, GemmOperand{x.data, in},
                     GemmOutput{dw.data, in, true}, packing);
  const cpu::FlushSubnormals flush;
  if (!dbias.empty())
    Eigen::Map<Eigen::RowVectorXf>(dbias.data, static_cast<Eigen::Index>(out)) +=
        Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(dy.data, dy.n(),
                                                                                                 static_cast<Eigen::Index>(out))
            .colwise()
            .sum();
}

}  // namespace cnn
