// Dense layers as one matrix product each, its rows spread over threads, with the packing
// buffers from the layer's planned workspace (backends/cpu/detail/gemm.hpp). In bf16 and fp16 the weights
// are packed once a call at the workspace's start, for every thread's rows (gemm16.hpp).
#include <Eigen/Core>
#include <algorithm>
#include <cstdint>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/detail/every_micro_batch.hpp"
#include "backends/cpu/detail/gemm.hpp"
#include "backends/cpu/detail/gemm16.hpp"
#include "backends/cpu/detail/subnormals.hpp"

namespace cnn {
namespace {

using cpu::GemmOperand;
using cpu::GemmOutput;

// The packing a layer's workspace holds. It was planned for the plan's micro-batch; a smaller
// last one may want other block sizes, and gemm fits its blocks to what there is.
cpu::Packing packing_of(const Workspace& ws) { return {static_cast<float*>(ws.data), ws.bytes / sizeof(float)}; }

// 16-bit products: the weights as B [k x n], packed whole at the workspace's start, and the packing after.
struct PackedWeights {
  std::uint32_t* words;
  cpu::Packing packing;
};

PackedWeights pack_weights(ValueFormat format, int threads, std::size_t k, std::size_t n, GemmOperand w,
                           const Workspace& ws) {
  const std::size_t words = cpu::aligned_floats(cpu::packed16_b_words(k, n));
  auto* packed = static_cast<std::uint32_t*>(ws.data);
  cpu::pack16_b(format, threads, k, n, w, packed);
  return {packed, {static_cast<float*>(ws.data) + words, ws.bytes / sizeof(float) - words}};
}

std::size_t workspace16_floats(int threads, std::size_t n, std::size_t in, std::size_t units, ConvPass pass) {
  if (pass == ConvPass::forward)  // y = x w^T: w^T packed
    return cpu::aligned_floats(cpu::packed16_b_words(in, units)) +
           cpu::parallel_gemm16_packing_floats(threads, n, units, in, false, true);
  return std::max(cpu::aligned_floats(cpu::packed16_b_words(units, in)) +  // dx = dy w: w packed
                      cpu::parallel_gemm16_packing_floats(threads, n, in, units, false, true),
                  cpu::parallel_gemm16_packing_floats(threads, units, in, n, false, false));  // dw += dy^T x
}

}  // namespace

std::size_t CpuBackend::do_dense_workspace_bytes(const Shape& x, int out, ConvPass pass) {
  return cpu::most_over_micro_batches(x[0], [&](int n) { return dense_workspace_at(cpu::at_batch(x, n), out, pass); });
}

std::size_t CpuBackend::dense_workspace_at(const Shape& x, int out, ConvPass pass) const {
  const std::size_t n = static_cast<std::size_t>(x[0]), in = x.elements() / n, units = static_cast<std::size_t>(out);
  if (products16()) return workspace16_floats(threads_, n, in, units, pass) * sizeof(float);
  if (pass == ConvPass::forward) return cpu::parallel_gemm_packing_floats(threads_, n, units, in) * sizeof(float);
  return std::max(cpu::parallel_gemm_packing_floats(threads_, n, in, units),        // dx[n x in] = dy w
                  cpu::parallel_gemm_packing_floats(threads_, units, in, n)) *  // dw[out x in] += dy^T x
         sizeof(float);
}

void CpuBackend::do_dense_forward(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y, Workspace ws) {
  const std::size_t n = static_cast<std::size_t>(x.n()), in = x.sample_elements(), out = y.sample_elements();
  // y[n x out] = x[n x in] w^T, w stored [out x in]
  if (products16()) {
    const PackedWeights packed = pack_weights(product_format(), threads_, in, out, GemmOperand{w.data, in, true}, ws);
    cpu::parallel_gemm16(product_format(), threads_, n, out, in, {GemmOperand{x.data, in}}, {{}, packed.words, out, 0},
                         GemmOutput{y.data, out}, packed.packing);
  } else {
    cpu::parallel_gemm(threads_, n, out, in, GemmOperand{x.data, in}, GemmOperand{w.data, in, true},
                       GemmOutput{y.data, out}, packing_of(ws));
  }
  const cpu::FlushSubnormals flush;  // the products flush on their own threads (parallel_ranges)
  if (!bias.empty())
    Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(y.data, x.n(), static_cast<Eigen::Index>(out))
        .rowwise() += Eigen::Map<const Eigen::RowVectorXf>(bias.data, static_cast<Eigen::Index>(out));
}

void CpuBackend::do_dense_backward_data(const Tensor& dy, const Tensor& w, Tensor dx, bool accumulate, Workspace ws) {
  const std::size_t n = static_cast<std::size_t>(dy.n()), in = dx.sample_elements(), out = dy.sample_elements();
  // dx[n x in] = dy[n x out] w[out x in]
  if (products16()) {
    const PackedWeights packed = pack_weights(product_format(), threads_, out, in, GemmOperand{w.data, in}, ws);
    cpu::parallel_gemm16(product_format(), threads_, n, in, out, {GemmOperand{dy.data, out}}, {{}, packed.words, in, 0},
                         GemmOutput{dx.data, in, accumulate}, packed.packing);
    return;
  }
  cpu::parallel_gemm(threads_, n, in, out, GemmOperand{dy.data, out}, GemmOperand{w.data, in},
                     GemmOutput{dx.data, in, accumulate}, packing_of(ws));
}

void CpuBackend::do_dense_backward_weights(const Tensor& x, const Tensor& dy, Tensor dw, Tensor dbias, Workspace ws) {
  const std::size_t n = static_cast<std::size_t>(x.n()), in = x.sample_elements(), out = dy.sample_elements();
  // dw[out x in] += dy^T[out x n] x[n x in], dy stored [n x out]
  if (products16())
    cpu::parallel_gemm16(product_format(), threads_, out, in, n, {GemmOperand{dy.data, out, true}},
                         {GemmOperand{x.data, in}}, GemmOutput{dw.data, in, true}, packing_of(ws));
  else
    cpu::parallel_gemm(threads_, out, in, n, GemmOperand{dy.data, out, true}, GemmOperand{x.data, in},
                       GemmOutput{dw.data, in, true}, packing_of(ws));
  const cpu::FlushSubnormals flush;
  if (!dbias.empty())
    Eigen::Map<Eigen::RowVectorXf>(dbias.data, static_cast<Eigen::Index>(out)) +=
        Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(dy.data, dy.n(),
                                                                                                 static_cast<Eigen::Index>(out))
            .colwise()
            .sum();
}

}  // namespace cnn
